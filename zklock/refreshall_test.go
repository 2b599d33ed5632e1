package zklock

import (
	"bufio"
	"context"
	"errors"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
)

// RefreshAll's first round of leases is one Sync and one read per node
// (which sets the node's watch), all pipelined: about n+1 requests for n
// leases, where n Refresh calls send 2n. It reports a node found gone for that lease alone, and a
// lock of another driver as a misuse.
func TestRefreshAll(t *testing.T) {
	c, ctx, d, _ := countedDriver(t)
	const n = 50
	locks, ttls := heldLocks(t, ctx, d, n, "-")
	addr := c.g.Addrs()[0]

	before := packetsReceived(t, addr)
	for i, err := range d.RefreshAll(ctx, locks, ttls) {
		if err != nil {
			t.Fatalf("RefreshAll: lock %d: %v", i, err)
		}
	}
	batch := packetsReceived(t, addr) - before
	before = packetsReceived(t, addr)
	for i, l := range locks {
		if err := l.Refresh(ctx, ttls[i]); err != nil {
			t.Fatalf("Refresh %d: %v", i, err)
		}
	}
	single := packetsReceived(t, addr) - before
	t.Logf("requests for %d renewals: RefreshAll %d, Refresh one by one %d", n, batch, single)
	if batch > n+1+3 { // a ping or two may fall in
		t.Errorf("RefreshAll of %d leases sent %d requests, want about %d (one Sync, then one Exists each)", n, batch, n+1)
	}
	if single < 2*n {
		t.Errorf("Refresh one by one sent %d requests for %d leases, want 2 each: the count is not counting", single, n)
	}

	// A node deleted behind the driver's back is reported for its lease only.
	n3 := locks[3].(*lockNode)
	if err := c.admin.Delete(n3.path, -1); err != nil {
		t.Fatal(err)
	}
	errs := d.RefreshAll(ctx, append(locks, foreignLock{}), append(ttls, time.Second))
	for i, err := range errs {
		switch {
		case i == 3 && !errors.Is(err, backend.ErrNotHeld):
			t.Errorf("lock 3, deleted: %v, want ErrNotHeld", err)
		case i == n && !errors.Is(err, backend.ErrInvalidConfig):
			t.Errorf("a lock of another driver: %v, want ErrInvalidConfig", err)
		case i != 3 && i != n && err != nil:
			t.Errorf("lock %d: %v", i, err)
		}
	}
	for _, l := range locks {
		_ = l.Release(ctx)
	}
}

type foreignLock struct{ backend.Lock }

// heldLocks takes n mutexes on d (keys uniqueKey(t)+infix+i, TTL 10 s) and
// returns them with their TTLs, as RefreshAll takes them.
func heldLocks(t *testing.T, ctx context.Context, d *Driver, n int, infix string) ([]backend.Lock, []time.Duration) {
	t.Helper()
	locks := make([]backend.Lock, n)
	ttls := make([]time.Duration, n)
	for i := range locks {
		g, err := d.TryAcquire(ctx, backend.Request{Key: uniqueKey(t) + infix + strconv.Itoa(i), Owner: "o", TTL: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		locks[i], ttls[i] = g.Lock, 10*time.Second
	}
	return locks, ttls
}

// packetsReceived asks the server (mntr) how many packets it has received.
func packetsReceived(t *testing.T, addr string) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("mntr")); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "zk_packets_received\t"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("mntr: no zk_packets_received (%v)", sc.Err())
	return 0
}

var _ backend.Batcher = (*Driver)(nil)

// TestRefreshAllPerSession: once every lease's node carries a watch (set by
// the first round, which checks each node on its own), a round of n
// renewals costs a Sync and one read for the whole session, plus one read
// per node whose watch fired; a node deleted behind the driver's back is
// still reported by the next round, for its lease only. After a reconnect
// the watches are not trusted: the next round checks (and re-arms) every
// node on its own, and finds a node deleted while the driver was cut off.
func TestRefreshAllPerSession(t *testing.T) {
	c, ctx, d, np := countedDriver(t)
	const n = 200
	locks, ttls := heldLocks(t, ctx, d, n, "-")
	addr := c.g.Addrs()[0]
	round := func(what string) (int, []error) {
		t.Helper()
		before := packetsReceived(t, addr)
		errs := d.RefreshAll(ctx, locks, ttls)
		return packetsReceived(t, addr) - before, errs
	}
	allOK := func(what string, errs []error, except int) {
		t.Helper()
		for i, err := range errs {
			switch {
			case i == except && !errors.Is(err, backend.ErrNotHeld):
				t.Errorf("%s: lock %d, deleted: %v, want ErrNotHeld", what, i, err)
			case i != except && err != nil:
				t.Errorf("%s: lock %d: %v", what, i, err)
			}
		}
	}

	first, errs := round("first round")
	allOK("first round", errs, -1)
	second, errs := round("second round")
	allOK("second round", errs, -1)
	t.Logf("requests for %d renewals: first round %d, second round %d", n, first, second)
	if second > 2+3 { // a ping or two may fall in
		t.Errorf("a round of %d watched leases sent %d requests, want 2 (one Sync, one read for the session)", n, second)
	}

	// Leases granted since: read (and watched) on their own, once.
	const more = 20
	newer, newTTLs := heldLocks(t, ctx, d, more, "-more-")
	locks, ttls = append(locks, newer...), append(ttls, newTTLs...)
	mixed, errs := round("new leases")
	allOK("new leases", errs, -1)
	if mixed > 2+more+3 {
		t.Errorf("a round of %d watched and %d new leases sent %d requests, want %d", n, more, mixed, 2+more)
	}
	if w := d.sess.watches.Load(); w != n+more {
		t.Errorf("the driver counts %d watches for %d leases, want one each", w, n+more)
	}

	// A node deleted behind the driver's back: found by the next round.
	if err := c.admin.Delete(locks[7].(*lockNode).path, -1); err != nil {
		t.Fatal(err)
	}
	third, errs := round("after a delete")
	allOK("after a delete", errs, 7)
	if third > 2+1+3 {
		t.Errorf("a round with one node deleted sent %d requests, want 3", third)
	}
	gone := []backend.Lock{locks[7]} // released too, as the portable layer does
	locks, ttls = append(locks[:7:7], locks[8:]...), ttls[1:]

	// Cut off; a node deleted meanwhile; back in the same session.
	np.block(true)
	if !eventually(10*time.Second, func() bool { return d.conn.State() != zk.StateHasSession }) {
		t.Fatal("the connection did not drop")
	}
	if err := c.admin.Delete(locks[9].(*lockNode).path, -1); err != nil {
		t.Fatal(err)
	}
	np.block(false)
	if !eventually(20*time.Second, func() bool { return d.conn.State() == zk.StateHasSession }) {
		t.Fatal("no session after the heal")
	}
	goroutines := runtime.NumGoroutine()
	fourth, errs := round("after a reconnect")
	if grown := runtime.NumGoroutine() - goroutines; grown > n/4 {
		t.Errorf("the round after a reconnect left %d goroutines more (re-armed watches waiting to fire?)", grown)
	}
	allOK("after a reconnect", errs, 9)
	if fourth < n+more-2 {
		t.Errorf("the round after a reconnect sent %d requests, want each of the %d leases checked on its own", fourth, n+more-2)
	}
	gone = append(gone, locks[9])
	locks, ttls = append(locks[:9:9], locks[10:]...), ttls[1:]
	fifth, errs := round("re-armed")
	allOK("re-armed", errs, -1)
	if fifth > 2+3 {
		t.Errorf("a round after the re-arming one sent %d requests, want 2", fifth)
	}
	t.Logf("after a delete %d, after a reconnect %d, then %d", third, fourth, fifth)
	for _, l := range append(locks, gone...) {
		_ = l.Release(ctx)
	}
	if w := d.sess.watches.Load(); w != 0 {
		t.Errorf("after every release the driver counts %d watches, want 0", w)
	}
}

// TestRefreshAllPerSessionUserConn: a connection passed to New renews per
// session with Options.WatchRenewals (per lease without it), and a reconnect
// the state poll sees makes the next round check every node on its own.
func TestRefreshAllPerSessionUserConn(t *testing.T) {
	c := startCluster(t, 1)
	ctx := ctxFor(t, time.Minute)
	for _, watch := range []bool{false, true} {
		d, conn, err := c.newUserDriver(ctx, 10*time.Second, &Options{SessionTimeout: 10 * time.Second, WatchRenewals: watch})
		if conn != nil {
			defer conn.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		const n = 50
		locks, ttls := heldLocks(t, ctx, d, n, "-")
		addr := c.g.Addrs()[0]
		round := func() int {
			t.Helper()
			before := packetsReceived(t, addr)
			for i, err := range d.RefreshAll(ctx, locks, ttls) {
				if err != nil && i != 5 {
					t.Errorf("WatchRenewals %v: lock %d: %v", watch, i, err)
				}
			}
			return packetsReceived(t, addr) - before
		}
		round()
		second := round()
		t.Logf("WatchRenewals %v: second round of %d leases: %d requests", watch, n, second)
		switch {
		case watch && second > 2+3:
			t.Errorf("WatchRenewals: a round of %d watched leases sent %d requests, want 2", n, second)
		case !watch && second < n:
			t.Errorf("without WatchRenewals a round of %d leases sent %d requests, want one each at least", n, second)
		}
		if !watch {
			continue
		}
		np, err := c.pathOf(d)
		if err != nil {
			t.Fatal(err)
		}
		gen := d.sess.gen.Load()
		np.block(true)
		if !eventually(10*time.Second, func() bool { return d.sess.gen.Load() != gen }) {
			t.Fatal("the state poll did not see the connection drop")
		}
		if err := c.admin.Delete(locks[5].(*lockNode).path, -1); err != nil {
			t.Fatal(err)
		}
		np.block(false)
		if !eventually(20*time.Second, func() bool { return conn.State() == zk.StateHasSession }) {
			t.Fatal("no session after the heal")
		}
		errs := d.RefreshAll(ctx, locks, ttls)
		if !errors.Is(errs[5], backend.ErrNotHeld) {
			t.Errorf("after a reconnect, the lock deleted meanwhile: %v, want ErrNotHeld", errs[5])
		}
		for _, l := range locks {
			_ = l.Release(ctx)
		}
	}
}
