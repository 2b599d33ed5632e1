package redislock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/testctx"
	"github.com/distlock/distlock/sandbox"
)

// Fault tests beyond the conformance suite, on real servers.

// testCtx returns a context that ends after d (testctx.For).
var testCtx = testctx.For

// singleLocker returns a Locker over node n with its own client.
func singleLocker(t *testing.T, n sandbox.Node, ttl time.Duration) *distlock.Locker {
	t.Helper()
	return lockerOver(t, nodeClient(n), distlock.WithDefaultTTL(ttl))
}

// lockerOver returns a Locker with opts over a driver (New, no options)
// on c; the Locker, then c, are closed when t ends.
func lockerOver(t *testing.T, c *redis.Client, opts ...distlock.LockerOption) *distlock.Locker {
	t.Helper()
	d, err := New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := distlock.New(d, opts...)
	t.Cleanup(func() { _ = l.Close(); _ = c.Close() })
	return l
}

const (
	holderEnvAddr = "DISTLOCK_TEST_HOLDER_ADDR"
	holderEnvKey  = "DISTLOCK_TEST_HOLDER_KEY"
)

// TestHelperHolder is the child process of TestHolderProcessKilled: it
// takes the lock, prints its token and validity deadline, and holds it
// (renewing) until it is killed.
func TestHelperHolder(t *testing.T) {
	addr := os.Getenv(holderEnvAddr)
	if addr == "" {
		t.Skip("only runs as the child of TestHolderProcessKilled")
	}
	l, err := distlock.Open(context.Background(), "redis://"+addr+"?ttl=2s")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	le, err := l.Acquire(testCtx(t, 20*time.Second), os.Getenv(holderEnvKey))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("HELD %d %d\n", le.Token(), le.Deadline().UnixNano())
	select {
	case <-le.Done():
		t.Fatalf("lost: %v", le.Err())
	case <-time.After(30 * time.Second):
	}
}

// TestHolderProcessKilled: a holder process is SIGKILLed; another client
// gets the lock only after the dead holder's validity ended (and within
// the TTL plus slack), with a greater token.
func TestHolderProcessKilled(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	key := "holder-killed"
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHolder$", "-test.v")
	cmd.Env = append(os.Environ(), holderEnvAddr+"="+g.Node(0).Addr(), holderEnvKey+"="+key)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	token, deadline := readHeld(t, stdout)
	killedAt := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	l := singleLocker(t, g.Node(0), time.Second)
	le, err := l.Acquire(testCtx(t, 30*time.Second), key)
	gotAt := time.Now()
	if err != nil {
		t.Fatalf("the dead holder's lock never became free: %v", err)
	}
	defer le.Release(testCtx(t, 5*time.Second))
	t.Logf("holder killed at %s (valid until %s); next holder at %s, %v after the kill",
		killedAt.Format(time.StampMilli), deadline.Format(time.StampMilli), gotAt.Format(time.StampMilli), gotAt.Sub(killedAt).Round(time.Millisecond))
	if !gotAt.After(deadline) {
		t.Errorf("another client held the lock at %v, before the dead holder's validity ended at %v", gotAt, deadline)
	}
	if gotAt.Sub(killedAt) > 2*time.Second+3*time.Second {
		t.Errorf("the lock freed %v after the kill, beyond its 2s TTL plus slack", gotAt.Sub(killedAt))
	}
	if le.Token() <= token {
		t.Errorf("token %d after the dead holder's %d", le.Token(), token)
	}
}

func readHeld(t *testing.T, r interface{ Read([]byte) (int, error) }) (uint64, time.Time) {
	t.Helper()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "HELD" {
			tok, _ := strconv.ParseUint(f[1], 10, 64)
			ns, _ := strconv.ParseInt(f[2], 10, 64)
			go func() { // drain the child's output until it dies
				for sc.Scan() {
				}
			}()
			return tok, time.Unix(0, ns)
		}
	}
	t.Fatalf("the holder process ended without holding the lock: %v", sc.Err())
	return 0, time.Time{}
}

// TestServerRestartWhileHolding: a server restarted WITHOUT persistence
// forgets the lock; the holder learns it at its next renewal (ErrLost)
// and the key is free again. The fencing counter is forgotten too: logged,
// since this is the documented limit of non-persistent Redis.
func TestServerRestartWhileHolding(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	n := g.Node(0)
	a, b := singleLocker(t, n, 2*time.Second), singleLocker(t, n, 2*time.Second)
	le := mustHold(t, a, "restart-holding")
	restart(t, n)
	select {
	case <-le.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder never noticed the restarted server forgot its lock")
	}
	if !errors.Is(le.Err(), distlock.ErrLost) {
		t.Errorf("Err() = %v, want ErrLost", le.Err())
	}
	t.Logf("holder: %v", le.Err())
	le2 := mustHold(t, b, "restart-holding")
	t.Logf("token before the restart %d, after %d (non-persistent Redis restarts its counters)", le.Token(), le2.Token())
	_ = le2.Release(testCtx(t, 5*time.Second))
}

// TestServerRestartPersistent: with an append-only file (fsync always) the
// lock and its counter survive a restart: the holder keeps its lease, a
// waiter blocked across the restart gets the lock once the holder
// releases, and tokens keep growing.
func TestServerRestartPersistent(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Persistent: true})
	n := g.Node(0)
	a, b := singleLocker(t, n, 5*time.Second), singleLocker(t, n, 5*time.Second)
	le := mustHold(t, a, "restart-persistent")
	type result struct {
		le  *distlock.Lease
		at  time.Time
		err error
	}
	got := make(chan result, 1)
	go func() {
		le, err := b.Acquire(testCtx(t, 60*time.Second), "restart-persistent")
		got <- result{le, time.Now(), err}
	}()
	time.Sleep(200 * time.Millisecond) // let the waiter subscribe
	restart(t, n)
	time.Sleep(3 * time.Second) // renewals run against the restarted server
	if le.Err() != nil {
		t.Fatalf("the holder lost its lease over a restart of a persistent server: %v", le.Err())
	}
	select {
	case r := <-got:
		t.Fatalf("the waiter got the lock while it was held: %v", r.err)
	default:
	}
	releasedAt := time.Now()
	if err := le.Release(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("the waiter never got the lock: %v", r.err)
	}
	t.Logf("waiter got the lock %v after the release", r.at.Sub(releasedAt).Round(time.Millisecond))
	if r.le.Token() <= le.Token() {
		t.Errorf("token %d after %d across a persistent restart", r.le.Token(), le.Token())
	}
	_ = r.le.Release(testCtx(t, 5*time.Second))
}

// TestServerPausedBeyondTTL: a holder whose server is frozen beyond the
// TTL reports the lease lost while the server is still frozen, before
// anyone else can get it; once the server resumes another client gets it.
func TestServerPausedBeyondTTL(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	n := g.Node(0)
	a, b := singleLocker(t, n, time.Second), singleLocker(t, n, time.Second)
	le := mustHold(t, a, "paused")
	if err := n.Pause(testCtx(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-le.Done():
	case <-time.After(5 * time.Second):
		_ = n.Resume(testCtx(t, time.Minute))
		t.Fatal("lease not reported lost while the server was frozen beyond its TTL")
	}
	lostAt := time.Now()
	if err := n.Resume(testCtx(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	le2, err := b.Acquire(testCtx(t, 30*time.Second), "paused")
	if err != nil {
		t.Fatalf("after the server resumed: %v", err)
	}
	if !lostAt.Before(time.Now()) || le2.Token() <= le.Token() {
		t.Errorf("second holder token %d, first %d", le2.Token(), le.Token())
	}
	_ = le2.Release(testCtx(t, 5*time.Second))
}
