package zklock

import (
	"bufio"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
)

// RefreshAll renews a round of leases with one Sync and one Exists per
// node, all pipelined: about n+1 requests for n leases, where n Refresh
// calls send 2n. It reports a node found gone for that lease alone, and a
// lock of another driver as a misuse.
func TestRefreshAll(t *testing.T) {
	c := startCluster(t, 1)
	ctx := ctxFor(t, time.Minute)
	d, _, err := c.newDriver(ctx, 10*time.Second) // pings every ~3 s: few in the counts
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	const n = 50
	locks := make([]backend.Lock, n)
	ttls := make([]time.Duration, n)
	for i := range locks {
		g, err := d.TryAcquire(ctx, backend.Request{Key: uniqueKey(t) + "-" + strconv.Itoa(i), Owner: "o", TTL: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		locks[i], ttls[i] = g.Lock, 10*time.Second
	}
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
