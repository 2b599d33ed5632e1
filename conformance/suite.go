package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

// caseTimeout bounds each case; a case that runs longer fails the run.
const caseTimeout = 3 * time.Minute

type testCase struct {
	name string
	rule string
	fn   func(t *testing.T, e *env)
}

// cases lists every rule in the order they run; the outage cases last,
// because they stop the server.
var cases = []testCase{
	{"MutualExclusion", "several Lockers and goroutines on one key never hold it at the same time", testMutualExclusion},
	{"TryAcquireOneWinner", "of N concurrent TryAcquires exactly one wins; the rest fail at once with ErrNotAcquired and leave nothing behind", testTryAcquireOneWinner},
	{"WaitDeadline", "a wait that hits its ctx deadline returns promptly, leaves no queued waiter, and never wins later", testWaitDeadline},
	{"WaitCancel", "a wait whose ctx is canceled returns promptly, leaves no queued waiter, and never wins later", testWaitCancel},
	{"FairOrder", "a store that declares itself fair grants waiters in the order they started waiting", testFairOrder},
	{"WaitThenAcquire", "a waiter gets the lock after the holder releases, well before the holder's TTL", testWaitThenAcquire},
	{"OwnerCheckedRelease", "a release after the lock expired and passed to another holder fails with ErrNotHeld and leaves the new holder's lock alone", testOwnerCheckedRelease},
	{"OwnerCheckedRefresh", "a refresh after the lock expired and passed to another holder fails with ErrNotHeld and leaves the new holder's lock alone", testOwnerCheckedRefresh},
	{"DoubleRelease", "releasing twice is an error, never a panic, and the second release frees nothing", testDoubleRelease},
	{"CrashedHolder", "a holder that dies without releasing loses the lock by the store's bound, and its own client reports the loss before anyone else holds it", testCrashedHolder},
	{"WatchdogRenews", "a lease held for 3×TTL stays held and exclusive", testWatchdogRenews},
	{"NoAutoRenewExpires", "without auto-renewal a lease expires: Done closes with ErrLost and another Locker can acquire", testNoAutoRenewExpires},
	{"LossDetected", "a lock removed behind its holder's back closes Done with ErrLost and cancels Do's ctx within a bound", testLossDetected},
	{"FencingTokens", "fencing tokens strictly increase across holders, Lockers, expiry and crashes; a re-entry shares its token", testFencingTokens},
	{"Reentrancy", "re-entries by the same owner share the hold and balance; a different owner stays blocked", testReentrancy},
	{"ReentryNeverShortens", "a re-entry asking for a shorter TTL never shortens the lease", testReentryNeverShortens},
	{"CrossProcessReentry", "two Lockers acquiring with the same owner both hold the lock when the store says it supports that", testCrossProcessReentry},
	{"KeyIndependence", "different keys never block each other, whatever characters they hold", testKeyIndependence},
	{"InvalidKeys", "keys no store may see are rejected with ErrInvalidKey", testInvalidKeys},
	{"WaiterDies", "a waiter whose own client dies while waiting gets an error, never the lock", testWaiterDies},
	{"Close", "Close ends every lease and wait; later calls return ErrClosed", testClose},
	{"ServerDown", "with the server down, acquisitions fail with a clear error within a bound; once it is back they work", testServerDown},
	{"ServerDownBeyondTTL", "a holder whose server is down beyond the TTL reports the lease lost", testServerDownBeyondTTL},
}

// Run runs every conformance case against the store mk gives access to.
func Run(t *testing.T, mk Maker) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Logf("rule: %s", c.rule)
			stop := watchdog(t, c.name)
			defer stop()
			ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
			defer cancel()
			h, err := mk(ctx, t)
			if err != nil {
				t.Fatalf("making harness: %v", err)
			}
			e := &env{h: h, ttl: h.TTL(), prefix: uniquePrefix(c.name)}
			t.Cleanup(func() {
				if err := h.Close(); err != nil {
					t.Errorf("closing harness: %v", err)
				}
			})
			c.fn(t, e)
		})
	}
}

// watchdog fails the whole run if a case hangs, printing every goroutine.
func watchdog(t *testing.T, name string) func() {
	timer := time.AfterFunc(caseTimeout+30*time.Second, func() {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		fmt.Fprintf(os.Stderr, "conformance: case %s of %s still running after %v; goroutines:\n%s\n", name, t.Name(), caseTimeout, buf[:n])
		panic("conformance: case " + name + " hung")
	})
	return func() { timer.Stop() }
}

func uniquePrefix(name string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "conf-" + strings.ToLower(name) + "-" + hex.EncodeToString(b[:]) + "-"
}

// env is one case's view of the store.
type env struct {
	h      Harness
	ttl    time.Duration
	prefix string
}

// key returns a key unique to this case.
func (e *env) key(name string) string { return e.prefix + name }

// client is one Locker with its driver.
type client struct {
	*distlock.Locker
	d backend.Driver
}

// locker makes a new independent Locker, closed when the case ends.
func (e *env) locker(t *testing.T, opts ...distlock.LockerOption) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := e.h.NewDriver(ctx)
	if err != nil {
		t.Fatalf("NewDriver: %v", err)
	}
	opts = append([]distlock.LockerOption{distlock.WithDefaultTTL(e.ttl)}, opts...)
	l := distlock.New(d, opts...)
	t.Cleanup(func() { _ = l.Close() })
	return &client{Locker: l, d: d}
}

// ctx returns a context that ends after d, canceled when the case ends.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// mustAcquire acquires key or fails the case.
func mustAcquire(t *testing.T, c *client, key string, opts ...distlock.Option) *distlock.Lease {
	t.Helper()
	le, err := c.Acquire(ctxFor(t, 30*time.Second), key, opts...)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	return le
}

// release releases le or fails the case.
func release(t *testing.T, le *distlock.Lease) {
	t.Helper()
	if err := le.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Release(%q): %v", le.Key(), err)
	}
}

// isFree reports whether another independent client can take key right now
// (and releases it again).
func isFree(t *testing.T, c *client, key string) bool {
	t.Helper()
	le, err := c.TryAcquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		if !isNotAcquired(err) {
			t.Fatalf("TryAcquire(%q): unexpected error %v", key, err)
		}
		return false
	}
	release(t, le)
	return true
}

// eventually polls cond every 10ms until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitDone waits up to d for le to end.
func waitDone(le *distlock.Lease, d time.Duration) bool {
	select {
	case <-le.Done():
		return true
	case <-time.After(d):
		return false
	}
}

var errDeadline = context.DeadlineExceeded
