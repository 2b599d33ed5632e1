package zklock

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

// contactSession is the session timeout of the contact tests: the longest
// the sandbox server grants (20 ticks of 250 ms), so that a reconnect
// (go-zookeeper waits a second before redialling a lone server) fits well
// within the two thirds of it a lock is trusted without contact.
const contactSession = 5 * time.Second

// waitState polls le.State() until it is want or d passes, and returns how
// long it took.
func waitState(le *distlock.Lease, want distlock.State, d time.Duration) (time.Duration, bool) {
	start := time.Now()
	for le.State() != want {
		if time.Since(start) > d {
			return time.Since(start), false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start), true
}

// checkPushedDoubt runs the scenario on a Locker a whose connection k can
// cut: a lease without auto-renewal (so only a push can put it in doubt)
// goes in doubt within bound of the disconnect, comes back after a
// reconnect within the session, and a partition longer than the session
// ends it with ErrLost before b can hold the lock.
func checkPushedDoubt(t *testing.T, c *cluster, a *distlock.Locker, k *netPath, bound time.Duration, shortened bool) {
	key := uniqueKey(t)
	b := newClient(t, c, testSession)
	le, err := a.Acquire(ctxFor(t, 10*time.Second), key, distlock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	k.block(true)
	took, ok := waitState(le, distlock.StateInDoubt, 2*time.Second)
	if !ok {
		t.Fatalf("State() = %v %v after the connection was cut, want in doubt within %v", le.State(), took, bound)
	}
	if took > bound {
		t.Errorf("in doubt %v after the connection was cut, want within %v", took, bound)
	}
	if dl := le.Deadline(); shortened && dl.After(cut.Add(contactSession*2/3)) {
		t.Errorf("deadline %v after the cut, want it brought forward to at most 2/3 of the session (%v)", dl.Sub(cut), contactSession*2/3)
	}
	t.Logf("in doubt %v after the cut; trusted until %v after it", took, le.Deadline().Sub(cut))

	// Healed within the session: the lease is held again.
	time.Sleep(200 * time.Millisecond)
	k.block(false)
	if took, ok := waitState(le, distlock.StateHeld, contactSession); !ok {
		t.Fatalf("after the connection came back within the session, State() = %v (err %v), want held", le.State(), le.Err())
	} else {
		t.Logf("held again %v after the heal", took)
	}
	if _, err := b.TryAcquire(ctxFor(t, 5*time.Second), key); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("after the blip, another client's TryAcquire = %v, want ErrNotAcquired", err)
	}

	// Partitioned for longer than the session: lost before b holds the lock.
	gotB := grantedAt(t, b, key)
	waitQueue(t, c, key, 2)
	cut = time.Now()
	k.block(true)
	if took, ok := waitState(le, distlock.StateInDoubt, 2*time.Second); !ok || took > bound {
		t.Errorf("partitioned again: State() = %v %v after the cut, want in doubt within %v", le.State(), took, bound)
	}
	select {
	case <-le.Done():
	case <-time.After(2 * contactSession):
		t.Fatal("lease not ended while partitioned beyond the session")
	}
	lostAt := time.Now()
	if shortened && lostAt.Sub(cut) > contactSession*2/3+time.Second {
		t.Errorf("lost %v after the cut, want about 2/3 of the session (%v)", lostAt.Sub(cut), contactSession*2/3)
	}
	if err := le.Err(); !errors.Is(err, distlock.ErrLost) || !strings.Contains(err.Error(), "connection to ZooKeeper lost") {
		t.Errorf("Err() = %v, want ErrLost naming the lost connection", err)
	}
	tb, ok := <-gotB
	if !ok {
		t.Fatal("b never got the lock")
	}
	if !lostAt.Before(tb) {
		t.Errorf("b held the lock %v after the cut, before a's lease was reported lost (%v after)", tb.Sub(cut), lostAt.Sub(cut))
	}
	t.Logf("lost %v after the cut (%v); b held the lock %v after the cut", lostAt.Sub(cut), le.Err(), tb.Sub(cut))
	k.block(false)
}

// TestDisconnectPushesDoubt: on a connection the driver opened, the lost
// connection is reported to the lease at once (go-zookeeper's event),
// vouched for until the last contact plus 2/3 of the session timeout.
func TestDisconnectPushesDoubt(t *testing.T) {
	c := startCluster(t, 1)
	a := newClient(t, c, contactSession)
	checkPushedDoubt(t, c, a.Locker, a.k, 200*time.Millisecond, true)
}

// TestDisconnectPushesDoubtOnUserConn: on a connection passed to New the
// driver polls the connection's state (a twentieth of the session timeout
// apart); it cannot know the last contact, so the deadline stays the one
// the last renewal gave.
func TestDisconnectPushesDoubtOnUserConn(t *testing.T) {
	c := startCluster(t, 1)
	k, err := c.newPath(c.g.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	conn, events, err := zk.Connect(c.g.Addrs(), contactSession, zk.WithDialer(k.dial), zk.WithLogger(quietLogger{}), zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	if err := awaitSession(ctxFor(t, 30*time.Second), events, nil); err != nil {
		t.Fatal(err)
	}
	d, err := New(conn, &Options{SessionTimeout: contactSession})
	if err != nil {
		t.Fatal(err)
	}
	a := distlock.New(d, distlock.WithDefaultTTL(contactSession))
	t.Cleanup(func() { _ = a.Close() })
	checkPushedDoubt(t, c, a, k, contactSession/20+300*time.Millisecond, false)
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// TestGoneNodeReleased: a lock whose node a Refresh finds gone stays in
// the locks the driver follows until the portable layer releases it, as it
// releases every Grant; that Release reports ErrNotHeld, leaves them, and
// deletes nothing (the next holder's node stays).
func TestGoneNodeReleased(t *testing.T) {
	c := startCluster(t, 1)
	d, _, err := c.newDriver(ctxFor(t, 30*time.Second), testSession)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	key := uniqueKey(t)
	g, err := d.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "o", TTL: testSession})
	if err != nil {
		t.Fatal(err)
	}
	if n := d.heldSet().Len(); n != 1 {
		t.Fatalf("%d locks followed after a grant, want 1", n)
	}
	if err := c.deleteHolder(key); err != nil {
		t.Fatal(err)
	}
	if err := g.Lock.Refresh(ctxFor(t, 10*time.Second), testSession); !errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("Refresh after the node was deleted: %v, want ErrNotHeld", err)
	}
	d2, _, err := c.newDriver(ctxFor(t, 30*time.Second), testSession)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	g2, err := d2.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "o2", TTL: testSession})
	if err != nil {
		t.Fatalf("another driver could not take the key: %v", err)
	}
	if err := g.Lock.Release(ctxFor(t, 10*time.Second)); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("Release of the gone lock: %v, want ErrNotHeld", err)
	}
	if n := d.heldSet().Len(); n != 0 {
		t.Errorf("%d locks followed after the gone lock's Release, want 0", n)
	}
	if err := g2.Lock.Refresh(ctxFor(t, 10*time.Second), testSession); err != nil {
		t.Errorf("the next holder's lock after the gone lock's Release: %v", err)
	}
	_ = g2.Lock.Release(ctxFor(t, 10*time.Second))
}
