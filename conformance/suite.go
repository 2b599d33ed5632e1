package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/testctx"
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
	{"CrashedHolder", "a holder that dies without releasing loses the lock by the store's bound, and its own client reports the loss before anyone else holds it (a holder on the harness's client and on a user-made one)", testCrashedHolder},
	{"WatchdogRenews", "a lease held for 3×TTL stays held and exclusive", testWatchdogRenews},
	{"NoAutoRenewExpires", "without auto-renewal a lease expires: Done closes with ErrLost and another Locker can acquire", testNoAutoRenewExpires},
	{"LossDetected", "a lock removed behind its holder's back closes Done with ErrLost and cancels Do's ctx within a bound", testLossDetected},
	{"GoneLockReleased", "a lock whose Refresh said ErrNotHeld is released once by the portable layer; that Release answers ErrNotHeld, frees nothing, and the driver pushes no doubt to it afterwards", testGoneLockReleased},
	{"TTLBounds", "a TTL above the store's declared maximum is refused with ErrInvalidConfig, never cut short", testTTLBounds},
	{"FencingTokens", "fencing tokens strictly increase across holders, Lockers, expiry and crashes; a re-entry shares its token", testFencingTokens},
	{"Reentrancy", "re-entries by the same owner share the hold and balance; a different owner stays blocked", testReentrancy},
	{"ReentryNeverShortens", "a re-entry asking for a shorter TTL never shortens the lease", testReentryNeverShortens},
	{"CrossProcessReentry", "two Lockers acquiring with the same owner both hold the lock when the store says it supports that", testCrossProcessReentry},
	{"FailedAttemptKeepsHold", "an acquisition that fails by its ctx, by another process with the same owner, never frees the hold the first process has", testFailedAttemptKeepsHold},
	{"KeyIndependence", "different keys never block each other, whatever characters they hold", testKeyIndependence},
	{"InvalidKeys", "keys no store may see are rejected with ErrInvalidKey", testInvalidKeys},
	{"ErrorTable", "bad input and refused requests match the same sentinels on every store (a canceled ctx is never ErrUnavailable), each error in one line saying distlock: once", testErrorTable},
	{"WaiterDies", "a waiter whose own client dies while waiting gets an error, never the lock", testWaiterDies},
	{"Close", "Close ends every lease and wait; later calls return ErrClosed", testClose},
	{"ElectionOneLeader", "candidates campaigning in rounds on several Lockers (some with the same value) never lead at the same time, each term is above the one before, and Leader reports the one in office", testElectionOneLeader},
	{"ElectionSuccession", "a dead leader is replaced within the store's bound after its client reported the loss, a resigning or closed leader at once; terms increase and Observe reports each change", testElectionSuccession},
	{"ElectionRules", "candidate values are checked, an Election campaigns once at a time, a campaign that gives up leaves nothing, and a resigned Election campaigns again with a greater term", testElectionRules},
	{"ElectionProclaim", "where the store keeps a leader's value, Proclaim reaches Observe and Leader with term and owner unchanged, pushed without polling where the store watches; a deposed leader's Proclaim fails and leaves its successor's value alone", testElectionProclaim},
	{"MultiLockNoDeadlock", "clients taking overlapping sets of keys in opposite and random orders all finish, never hold a key together, and see each key's tokens increase", testMultiLockNoDeadlock},
	{"MultiLockNothingPartial", "a multi-lock that fails midway (a key held elsewhere, its ctx ending, an invalid key) leaves none of its keys held; duplicates are taken once", testMultiLockNothingPartial},
	{"MultiLockLossOfPart", "a key of a multi-lease lost behind its back ends the whole multi-lease with ErrLost naming the key, and frees its other keys", testMultiLockLossOfPart},
	{"MultiLockOneStep", "where the store takes several keys in one step (MultiAtomic), a TryAcquireAll that finds a key held never holds any other key of its set, not even for a moment", testMultiLockOneStep},
	{"MultiAcquire", "TryAcquireMulti (where offered) takes every key or none: a key held elsewhere is named in ErrNotAcquired and nothing else is taken; free keys are granted in order with tokens above their earlier ones, each lock released on its own", testMultiAcquire},
	{"SemaphoreLimit", "several Lockers taking 1 or 2 permits of an N-permit semaphore at once never hold more than N permits together", testSemaphoreLimit},
	{"SemaphoreTryFull", "a try for more permits than are free fails at once with ErrNotAcquired and takes none; a release frees exactly its permits; the lock of the same name is independent", testSemaphoreTryFull},
	{"SemaphoreLimitChange", "the limit is the acquirer's: after it is lowered no one is admitted until the permits held fit it, holders above it keep theirs, and a raised limit admits at once", testSemaphoreLimitChange},
	{"SemaphoreTokens", "each grant of permits gets a token strictly above every token granted before for the semaphore, across Lockers, releases and expiry", testSemaphoreTokens},
	{"SemaphoreCrashedHolder", "a crashed holder's permits return by the store's bound, after its own client reported them lost", testSemaphoreCrashedHolder},
	{"SemaphoreWaitCancel", "a waiter gets its permit soon after a release; a waiter whose ctx ends returns promptly and leaves nothing queued or held", testSemaphoreWaitCancel},
	{"SemaphoreMixedLimits", "a grant never puts more permits in use than the asker's own limit, even when an asker with a larger limit came while it waited", testSemaphoreMixedLimits},
	{"SemaphoreFIFO", "where the semaphore is declared fair, a waiter for many permits is not overtaken by a later waiter for fewer", testSemaphoreFIFO},
	{"RWExclusion", "read-write locks: never a writer together with a reader or another writer, across Lockers and goroutines", testRWExclusion},
	{"RWReadersShare", "read-write locks: readers of different owners hold together; a writer is refused while any reader holds, and readers and writers while a writer holds", testRWReadersShare},
	{"RWWriterNotStarved", "read-write locks: a waiting writer keeps new readers out and gets in, within a bound, while a stream of readers would otherwise always hold the lock", testRWWriterNotStarved},
	{"RWTokens", "read-write locks: write tokens strictly increase across writers, Lockers and expiry; a read lease (the writer's own too) carries the last write's token", testRWTokens},
	{"RWCrashedHolder", "read-write locks: a writer's or reader's lock whose client died is free for a writer within the store's bound, and the dead client reports it lost", testRWCrashedHolder},
	{"RWWaitCancel", "read-write locks: a writer or reader whose wait ends by its ctx returns promptly and leaves nothing that keeps others out", testRWWaitCancel},
	{"RWUpgrade", "read-write locks: a reader asking for the write side is refused with ErrUpgrade (same Locker, or another with the same owner where the store counts holds per owner), never left waiting; a writer may take the read side, which keeps the lock exclusive until both are released", testRWUpgrade},
	{"UndeclaredKinds", "a request of a kind the driver does not declare (no semaphore or read-write lock in this store or mode) is refused with ErrUnsupported and takes nothing, not the mutex of its key either", testUndeclaredKinds},
	{"ForceRelease", "a lock freed by hand (where the store declares ForceRelease) goes to the waiting client with a greater token, and the freed holder's lease ends with ErrLost at its next renewal; a free key answers ErrNotHeld", testForceRelease},
	{"Inspect", "Inspect (where declared: Capabilities.Inspect) reports a free key free and a held key with its holder's owner and token", testInspect},
	{"List", "List (where Inspect is declared) reports exactly the held keys under a prefix, sorted, with owners and tokens, within its limit", testList},
	{"BatchRefresh", "RefreshAll (where implemented) answers for each lock on its own and refuses another driver's", testBatchRefresh},
	{"Notify", "Subscribe (where implemented) announces a release within a TTL", testNotify},
	{"Wait", "Wait (where implemented) grants soon after the release with a greater token; a Wait that gives up leaves nothing", testWait},
	{"StallEndsAtDeadline", "a holder whose store stops answering for longer than the TTL (its path stalled both ways, or the server paused) sees every lease, of every primitive, end no later than its own Deadline() and before another client is granted the lock, with the harness's client and with a user-made one whose calls may ignore ctx", testStallEndsAtDeadline},
	{"PartitionedHolder", "a holder cut off by a partition reports the lease in doubt within three quarters of its TTL (its renewal is due by TTL/3 and unanswered after TTL/6 more) and lost before the store grants the lock to anyone else (a holder on the harness's client and on a user-made one)", testPartitionedHolder},
	{"PartitionHealed", "a partition shorter than the validity is survived: the lease is held again after the heal (a holder on the harness's client and on a user-made one)", testPartitionHealed},
	{"PartitionedHolderReacquires", "a holder cut off past its TTL that takes keys again at once after the heal holds them exclusively or is told they are lost, and its Release frees them for others within 3×TTL, never for its new session's life (a holder on the harness's client and on a user-made one)", testPartitionedHolderReacquires},
	{"LostAcquireReply", "an acquisition whose reply is lost leaves no ghost: the caller holds the lock, or it is free within 2×TTL (a caller on the harness's client and on a user-made one, whose library may retry)", testLostAcquireReply},
	{"LostReleaseReply", "a release whose reply is lost frees the lock once: never the next holder's, never another process's hold of the same owner (a caller on the harness's client and on a user-made one, whose library may retry)", testLostReleaseReply},
	{"LostRefreshReply", "a stale holder's refresh whose reply is lost neither extends nor shortens the new holder's lock", testLostRefreshReply},
	{"ServerDown", "with the server down, acquisitions fail with a clear error within a bound; once it is back they work", testServerDown},
	{"ServerDownBeyondTTL", "a holder whose server is down beyond the TTL reports the lease lost", testServerDownBeyondTTL},
}

// exclusive names the cases that stop or pause the store for everyone:
// with Parallel they run alone, after the others.
var exclusive = map[string]bool{"StallEndsAtDeadline": true, "ServerDown": true, "ServerDownBeyondTTL": true}

// An Option changes how Run runs the cases.
type Option func(*runConfig)

type runConfig struct {
	parallel int
	virtual  bool
}

// Parallel runs up to n cases at once, each with its own key prefix and
// harness (the cases that stop or pause the store run alone, after the
// others). The Maker is then called from several goroutines at once, and
// the store must take the load; the cases mostly wait for TTLs, so the
// project's drivers run 3 or 4 at a time against one server. n < 2 runs
// the cases one by one.
func Parallel(n int) Option { return func(c *runConfig) { c.parallel = n } }

// VirtualTime runs each case in a testing/synctest bubble: time is virtual
// and moves only when every goroutine of the case is blocked, so the TTL
// rules are checked at their exact instants and a busy machine cannot make
// a lease miss its renewal. It is for in-process stores (memlock) whose
// every goroutine, channel and timer the case itself creates: the Maker is
// called inside the bubble, and must make a new store there, never share
// one across cases. A store behind a socket cannot run in a bubble.
func VirtualTime() Option { return func(c *runConfig) { c.virtual = true } }

// Run runs every conformance case against the store mk gives access to.
// Every case has finished when it returns.
func Run(t *testing.T, mk Maker, opts ...Option) {
	t.Helper()
	var cfg runConfig
	for _, o := range opts {
		o(&cfg)
	}
	run := func(c testCase) {
		t.Run(c.name, func(t *testing.T) {
			if cfg.virtual {
				synctest.Test(t, func(t *testing.T) { runCase(t, c, mk, true) })
				return
			}
			runCase(t, c, mk, false)
		})
	}
	if cfg.parallel < 2 {
		for _, c := range cases {
			run(c)
		}
		return
	}
	// t.Run may be called from several goroutines at once; every call
	// returns before Run does. (t.Parallel would be bounded by go test's
	// -parallel, GOMAXPROCS by default, and would outlive Run.)
	var wg sync.WaitGroup
	slots := make(chan struct{}, cfg.parallel)
	for _, c := range cases {
		if exclusive[c.name] {
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			run(c)
		})
	}
	wg.Wait()
	for _, c := range cases {
		if exclusive[c.name] {
			run(c)
		}
	}
}

// runCase runs one case on a harness of its own, in a bubble if virtual.
func runCase(t *testing.T, c testCase, mk Maker, virtual bool) {
	t.Logf("rule: %s", c.rule)
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	h, err := mk(ctx, t)
	if err != nil {
		t.Fatalf("making harness: %v", err)
	}
	e := &env{h: h, ttl: h.TTL(), prefix: uniquePrefix(c.name), virtual: virtual}
	closeHarness := sync.OnceValue(h.Close)
	t.Cleanup(func() {
		if err := closeHarness(); err != nil {
			t.Errorf("closing harness: %v", err)
		}
	})
	runGuarded(t, c.name, caseTimeout, func() { c.fn(t, e) }, closeHarness)
}

// hangGrace is how long a hung case gets to return once its harness was
// closed under it.
const hangGrace = 30 * time.Second

// runGuarded runs fn (a case, which may call t.Fatal) and waits for it. If
// it runs longer than limit, the case fails with every goroutine's stack,
// the harness is closed (which unblocks most hung store calls, and gets
// servers and containers cleaned up), and fn gets hangGrace to return.
// Only if it still does not is the test binary stopped, as the testing
// package's own -timeout would.
func runGuarded(t *testing.T, name string, limit time.Duration, fn func(), closeHarness func() error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-done:
		return
	case <-timer.C:
	}
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	t.Errorf("case %s still running after %v; closing its harness. Goroutines:\n%s", name, limit, buf[:n])
	if err := closeHarness(); err != nil {
		t.Errorf("closing harness: %v", err)
	}
	select {
	case <-done:
	case <-time.After(hangGrace):
		fmt.Fprintf(os.Stderr, "conformance: case %s of %s did not return within %v of its harness closing\n", name, t.Name(), hangGrace)
		panic("conformance: case " + name + " hung")
	}
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
	// virtual: the case runs in a synctest bubble, where t.Run is refused.
	virtual bool
}

// part runs fn as a subtest named name, or, in a bubble (where t.Run is
// refused), in t itself under a log line naming it.
func (e *env) part(t *testing.T, name string, fn func(t *testing.T)) {
	if e.virtual {
		t.Logf("part %s", name)
		fn(t)
		return
	}
	t.Run(name, fn)
}

// key returns a key unique to this case.
func (e *env) key(name string) string { return e.prefix + name }

// client is one Locker with its driver.
type client struct {
	*distlock.Locker
	d     backend.Driver
	probe *probe // what the Locker reports of its waits, renewals and leases
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
	p := newProbe()
	opts = append(append([]distlock.LockerOption{distlock.WithDefaultTTL(e.ttl)}, p.options()...), opts...)
	l := distlock.New(d, opts...)
	t.Cleanup(func() { _ = l.Close() })
	return &client{Locker: l, d: d, probe: p}
}

// ctxFor returns a context that ends after d, canceled when the case's
// cleanups run (testctx.For).
var ctxFor = testctx.For

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

// eventually polls cond every 10ms until it holds or d passes: for
// conditions no event announces (a store's state seen by another client).
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		pause(10 * time.Millisecond)
	}
}

// heldAgain reports le's state, giving a lease in doubt until its deadline
// to be held again. In doubt is also a moment's state: a renewal in flight
// for more than TTL/6 shows it, as on a machine whose cores are busy with
// other work. A healthy lease answers held before its deadline; one whose
// renewals fail stays in doubt or ends, and is reported as it is then.
func heldAgain(le *distlock.Lease) distlock.State {
	s := le.State()
	if s != distlock.StateInDoubt {
		return s
	}
	eventually(time.Until(le.Deadline()), func() bool { return le.State() != distlock.StateInDoubt })
	return le.State()
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
