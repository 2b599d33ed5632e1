package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/internal/shim"
	"github.com/distlock/distlock/memlock"
)

// The suite must be able to fail. Each broken driver below wraps memlock
// with one classic bug; the suite, run against it in a child process, must
// fail, and in the cases named.
var brokenDrivers = []brokenDriver{
	{
		name: "release-without-owner-check",
		wrap: func(s *memlock.Store, d backend.Driver) backend.Driver {
			return &noOwnerCheck{Notifier: shim.Notifier{Driver: d}, s: s}
		},
		mustFail: []string{"OwnerCheckedRelease", "DoubleRelease"},
	},
	{
		name:     "repeated-tokens",
		wrap:     func(_ *memlock.Store, d backend.Driver) backend.Driver { return &constToken{shim.Notifier{Driver: d}} },
		mustFail: []string{"FencingTokens", "ElectionOneLeader", "ElectionSuccession"},
	},
	{
		name:     "overlapping-holds",
		wrap:     func(_ *memlock.Store, d backend.Driver) backend.Driver { return &grantAlways{shim.Notifier{Driver: d}} },
		mustFail: []string{"MutualExclusion", "TryAcquireOneWinner", "ElectionOneLeader", "ElectionRules"},
	},
	{
		name: "refresh-without-owner-check",
		wrap: func(_ *memlock.Store, d backend.Driver) backend.Driver {
			return &refreshAlways{shim.Notifier{Driver: d}}
		},
		mustFail: []string{"OwnerCheckedRefresh", "LossDetected", "LostRefreshReply"},
	},
	{
		name: "refresh-trusted-while-unreachable",
		wrap: func(_ *memlock.Store, d backend.Driver) backend.Driver {
			return &trustUnreachable{shim.Notifier{Driver: d}}
		},
		mustFail: []string{"PartitionedHolder"},
	},
	{
		name:     "doubt-taken-for-loss",
		wrap:     func(_ *memlock.Store, d backend.Driver) backend.Driver { return &doubtIsLoss{shim.Notifier{Driver: d}} },
		mustFail: []string{"PartitionHealed"},
	},
	{
		name:     "optional-interfaces-lie",
		wrap:     func(_ *memlock.Store, d backend.Driver) backend.Driver { return &liar{Driver: d} },
		mustFail: []string{"Inspect", "List", "BatchRefresh", "Notify", "Wait", "ElectionSuccession"},
	},
	{
		name: "gone-lock-stays-registered",
		wrap: func(_ *memlock.Store, d backend.Driver) backend.Driver {
			return &goneSkipsRelease{shim.Notifier{Driver: d}}
		},
		mustFail: []string{"GoneLockReleased"},
	},
	{
		name: "release-after-gone-frees-by-name",
		wrap: func(s *memlock.Store, d backend.Driver) backend.Driver {
			return &goneFreesByName{Notifier: shim.Notifier{Driver: d}, s: s}
		},
		mustFail: []string{"GoneLockReleased"},
	},
	{
		name:     "retries-not-idempotent",
		wrap:     func(_ *memlock.Store, d backend.Driver) backend.Driver { return d },
		retry:    true,
		mustFail: []string{"LostAcquireReply", "LostReleaseReply"},
	},
	{name: rwNoExclusion, wrap: brokenRWOf(rwNoExclusion), mustFail: []string{"RWExclusion", "RWReadersShare"}},
	{name: rwNoMark, wrap: brokenRWOf(rwNoMark), mustFail: []string{"RWWriterNotStarved"}},
	{name: rwConstTokens, wrap: brokenRWOf(rwConstTokens), mustFail: []string{"RWTokens"}},
	{name: rwKeepMark, wrap: brokenRWOf(rwKeepMark), mustFail: []string{"RWWaitCancel"}},
	{name: rwUpgradeWait, wrap: brokenRWOf(rwUpgradeWait), mustFail: []string{"RWUpgrade"}},
	{name: rwStoreTTL, wrap: brokenRWOf(rwStoreTTL), mustFail: []string{"RWCrashedHolder"}},
	{
		name:     "multi-lock-in-given-order",
		wrap:     func(_ *memlock.Store, d backend.Driver) backend.Driver { return d },
		multi:    &naiveMulti{unsorted: true},
		mustFail: []string{"MultiLockNoDeadlock"},
	},
	{
		name:     "multi-lock-keeps-partial-set",
		wrap:     func(_ *memlock.Store, d backend.Driver) backend.Driver { return d },
		multi:    &naiveMulti{keepPartial: true},
		mustFail: []string{"MultiLockNothingPartial"},
	},
	{
		name:     "multi-lock-ignores-part-loss",
		wrap:     func(_ *memlock.Store, d backend.Driver) backend.Driver { return d },
		multi:    &naiveMulti{},
		mustFail: []string{"MultiLockLossOfPart"},
	},
	{name: "multi-lock-one-step-is-several", wrap: wrapMulti(multiStepByStep), mustFail: []string{"MultiLockOneStep"}},
	{name: "multi-lock-one-step-keeps-part", wrap: wrapMulti(multiKeepsPart), mustFail: []string{"MultiLockNothingPartial", "MultiAcquire"}},
	{name: "multi-lock-one-step-checks-one-key", wrap: wrapMulti(multiFirstKeyOnly), mustFail: []string{"MultiLockNoDeadlock", "MultiAcquire"}},
	{name: "kind-ignored", wrap: func(_ *memlock.Store, d backend.Driver) backend.Driver { return &kindBlind{shim.Notifier{Driver: d}} }, mustFail: []string{"UndeclaredKinds"}},
	{name: "semaphore-ignores-limit", wrap: wrapSemaphore(semIgnoresLimit), mustFail: []string{"SemaphoreLimit", "SemaphoreTryFull", "SemaphoreLimitChange"}},
	{name: "semaphore-repeats-tokens", wrap: wrapSemaphore(semRepeatsTokens), mustFail: []string{"SemaphoreTokens"}},
	{name: "semaphore-permits-never-expire", wrap: wrapSemaphore(semNeverExpires), mustFail: []string{"SemaphoreCrashedHolder"}},
	{name: "semaphore-waiter-leaves-a-ghost", wrap: wrapSemaphore(semGhostOfWaiters), mustFail: []string{"SemaphoreWaitCancel"}},
	{name: "semaphore-largest-limit-wins", wrap: wrapSemaphore(semLargestLimit), mustFail: []string{"SemaphoreMixedLimits"}},
	{name: "semaphore-claims-fair", wrap: wrapSemaphore(semClaimsFair), mustFail: []string{"SemaphoreFIFO"}},
}

const (
	brokenEnv  = "DISTLOCK_CONFORMANCE_BROKEN"
	virtualEnv = "DISTLOCK_CONFORMANCE_VIRTUAL" // "1": the child runs the cases with VirtualTime
)

func TestSuiteCatchesBrokenDrivers(t *testing.T) {
	if name := os.Getenv(brokenEnv); name != "" {
		runBroken(t, name)
		return
	}
	if testing.Short() {
		t.Skip("runs the suite in child processes")
	}
	// The children mostly wait for TTLs: 8 at once (t.Parallel would run
	// GOMAXPROCS of them at a time).
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, 8)
	// Each broken driver is caught in real time and in virtual time
	// (conformance.VirtualTime must not blind the suite).
	for _, virtual := range []bool{false, true} {
		for _, b := range brokenDrivers {
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				brokenChild(t, b, virtual)
			})
		}
	}
}

type brokenDriver struct {
	name     string
	wrap     func(s *memlock.Store, d backend.Driver) backend.Driver
	retry    bool        // lost replies are retried by re-running the operation
	multi    *naiveMulti // a broken multi-lock the multi-lock cases use instead of AcquireAll
	mustFail []string
}

// brokenChild runs the cases that must catch b in a child process.
func brokenChild(t *testing.T, b brokenDriver, virtual bool) {
	name := b.name
	if virtual {
		name += "/virtual-time"
	}
	t.Run(name, func(t *testing.T) {
		pattern := "^TestSuiteCatchesBrokenDrivers$/^(" + strings.Join(b.mustFail, "|") + ")$"
		cmd := exec.Command(os.Args[0], "-test.run="+pattern, "-test.v", "-test.timeout=5m")
		cmd.Env = append(os.Environ(), brokenEnv+"="+b.name)
		if virtual {
			cmd.Env = append(cmd.Env, virtualEnv+"=1")
		}
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("the suite passed a driver with %s:\n%s", b.name, out)
		}
		for _, c := range b.mustFail {
			if !strings.Contains(string(out), "--- FAIL: TestSuiteCatchesBrokenDrivers/"+c+" ") {
				t.Errorf("case %s did not catch %s; output:\n%s", c, b.name, out)
			}
		}
	})
}

func runBroken(t *testing.T, name string) {
	for _, b := range brokenDrivers {
		if b.name != name {
			continue
		}
		s := memlock.NewStore()
		if b.multi != nil {
			conformance.SetAcquireAll(b.multi.acquireAll)
		}
		opts := []conformance.Option{conformance.Parallel(8)}
		virtual := os.Getenv(virtualEnv) == "1"
		if virtual {
			opts = append(opts, conformance.VirtualTime())
		}
		conformance.Run(t, func(context.Context, *testing.T) (conformance.Harness, error) {
			st := s
			if virtual { // a store per case, made in its bubble
				st = memlock.NewStore()
			}
			return &brokenHarness{s: st, wrap: b.wrap, retry: b.retry, lossy: map[backend.Driver]*lossy{}}, nil
		}, opts...)
		return
	}
	t.Fatalf("unknown broken driver %q", name)
}

type brokenHarness struct {
	s     *memlock.Store
	wrap  func(*memlock.Store, backend.Driver) backend.Driver
	retry bool

	mu    sync.Mutex
	lossy map[backend.Driver]*lossy // by the driver the suite holds
}

func (h *brokenHarness) NewDriver(context.Context) (backend.Driver, error) {
	d, err := h.s.NewDriver(nil)
	if err != nil {
		return nil, err
	}
	ld := &lossy{Notifier: shim.Notifier{Driver: d}, s: h.s, retry: h.retry}
	out := h.wrap(h.s, ld)
	h.mu.Lock()
	h.lossy[out] = ld
	h.mu.Unlock()
	return out, nil
}

func (h *brokenHarness) lossyOf(d backend.Driver) *lossy {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lossy[d]
}

func (h *brokenHarness) Partition(_ context.Context, d backend.Driver) error {
	h.lossyOf(d).mem().Partition(0)
	return nil
}

func (h *brokenHarness) Heal(_ context.Context, d backend.Driver) error {
	h.lossyOf(d).mem().Heal()
	return nil
}

func (h *brokenHarness) DropNextReply(_ context.Context, d backend.Driver) error {
	h.lossyOf(d).armed.Store(true)
	return nil
}

func (h *brokenHarness) Dropped(d backend.Driver) int { return int(h.lossyOf(d).dropped.Load()) }

// lossy models the network between a memlock driver and its store for the
// lost-reply cases: an armed call runs in the store and its caller gets
// ErrUnavailable, after the driver gave back what an acquisition took (as a
// correct driver's cleanup does). With retry it models a client that
// re-sends the request instead, without the idempotency that makes that
// safe: an acquisition is taken twice, and the retried release deletes
// the lock by name a moment later.
type lossy struct {
	shim.Notifier
	s       *memlock.Store
	retry   bool
	armed   atomic.Bool
	dropped atomic.Int32
}

func (d *lossy) mem() *memlock.Driver { return d.Driver.(*memlock.Driver) }
func (d *lossy) take() bool {
	if d.armed.CompareAndSwap(true, false) {
		d.dropped.Add(1)
		return true
	}
	return false
}

var errReplyLost = fmt.Errorf("reply lost: %w", backend.ErrUnavailable)

func (d *lossy) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	if req.Kind != backend.Exclusive {
		// Semaphores and read-write locks reach the store as before the
		// kinds shared one entry, when lossy had no method for them: only
		// the mutex's replies get lost.
		return d.Driver.TryAcquire(ctx, req)
	}
	g, err := d.Driver.TryAcquire(ctx, req)
	if !d.take() {
		return d.wrapGrant(req.Key, g, err)
	}
	if d.retry {
		if err == nil {
			g, err = d.Driver.TryAcquire(ctx, req) // counted twice
			return d.wrapGrant(req.Key, g, err)
		}
		return g, err
	}
	if err == nil {
		_ = g.Lock.Release(ctx)
	}
	return backend.Grant{}, errReplyLost
}

func (d *lossy) wrapGrant(key string, g backend.Grant, err error) (backend.Grant, error) {
	if err == nil {
		g.Lock = &lossyLock{Lock: g.Lock, d: d, key: key}
	}
	return g, err
}

type lossyLock struct {
	backend.Lock
	d   *lossy
	key string
}

func (l *lossyLock) Release(ctx context.Context) error {
	err := l.Lock.Release(ctx)
	if !l.d.take() {
		return err
	}
	if l.d.retry {
		time.AfterFunc(50*time.Millisecond, func() { l.d.s.Delete(l.key) })
		return err
	}
	return errReplyLost
}

func (l *lossyLock) Refresh(ctx context.Context, ttl time.Duration) error {
	err := l.Lock.Refresh(ctx, ttl)
	if l.d.take() {
		return errReplyLost
	}
	return err
}

// trustUnreachable reports a refresh that could not reach the store as a
// success.
type trustUnreachable struct{ shim.Notifier }

func (d *trustUnreachable) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	g, err := d.Driver.TryAcquire(ctx, req)
	if err == nil {
		g.Lock = trustingLock{g.Lock}
	}
	return g, err
}

type trustingLock struct{ backend.Lock }

func (l trustingLock) Refresh(ctx context.Context, ttl time.Duration) error {
	if err := l.Lock.Refresh(ctx, ttl); err != nil && !errors.Is(err, backend.ErrUnavailable) {
		return err
	}
	return nil
}

// doubtIsLoss reports the lock gone once a refresh could not reach the
// store, even after contact returns.
type doubtIsLoss struct{ shim.Notifier }

func (d *doubtIsLoss) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	g, err := d.Driver.TryAcquire(ctx, req)
	if err == nil {
		g.Lock = &lossyDoubt{Lock: g.Lock}
	}
	return g, err
}

type lossyDoubt struct {
	backend.Lock
	gone atomic.Bool
}

func (l *lossyDoubt) Refresh(ctx context.Context, ttl time.Duration) error {
	if l.gone.Load() {
		return backend.ErrNotHeld
	}
	err := l.Lock.Refresh(ctx, ttl)
	if errors.Is(err, backend.ErrUnavailable) {
		l.gone.Store(true)
		return fmt.Errorf("%w: %w", backend.ErrNotHeld, err)
	}
	return err
}
func (h *brokenHarness) TTL() time.Duration { return 300 * time.Millisecond }
func (h *brokenHarness) Kill(_ context.Context, d backend.Driver) error {
	h.lossyOf(d).mem().Kill()
	return nil
}
func (h *brokenHarness) Delete(_ context.Context, key string) error { h.s.Delete(key); return nil }
func (h *brokenHarness) Close() error                               { return nil }

// goneSkipsRelease relies on the old contract (no Release after a Refresh
// said ErrNotHeld): its Release of such a lock answers ErrNotHeld without
// telling the driver, which therefore keeps the lock among those it pushes
// doubt to.
type goneSkipsRelease struct{ shim.Notifier }

func (d *goneSkipsRelease) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	g, err := d.Driver.TryAcquire(ctx, req)
	if err == nil {
		g.Lock = &goneLock{Lock: g.Lock, release: func(context.Context) error { return backend.ErrNotHeld }}
	}
	return g, err
}

// goneFreesByName treats a Release after a Refresh said ErrNotHeld as a
// cleanup that cannot hurt: it deletes the key by name, whoever holds it
// now, and reports success.
type goneFreesByName struct {
	shim.Notifier
	s *memlock.Store
}

func (d *goneFreesByName) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	g, err := d.Driver.TryAcquire(ctx, req)
	if err == nil {
		g.Lock = &goneLock{Lock: g.Lock, release: func(context.Context) error { d.s.Delete(req.Key); return nil }}
	}
	return g, err
}

// goneLock calls release instead of the lock's own Release once a Refresh
// said ErrNotHeld.
type goneLock struct {
	backend.Lock
	gone    atomic.Bool
	release func(context.Context) error
}

func (l *goneLock) Refresh(ctx context.Context, ttl time.Duration) error {
	err := l.Lock.Refresh(ctx, ttl)
	if errors.Is(err, backend.ErrNotHeld) {
		l.gone.Store(true)
	}
	return err
}

func (l *goneLock) Release(ctx context.Context) error {
	if l.gone.Load() {
		return l.release(ctx)
	}
	return l.Lock.Release(ctx)
}

// noOwnerCheck releases by deleting the key, whoever holds it.
type noOwnerCheck struct {
	shim.Notifier
	s *memlock.Store
}

func (d *noOwnerCheck) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	g, err := d.Driver.TryAcquire(ctx, req)
	if err == nil {
		g.Lock = &deleteLock{Lock: g.Lock, s: d.s, key: req.Key}
	}
	return g, err
}

type deleteLock struct {
	backend.Lock
	s   *memlock.Store
	key string
}

func (l *deleteLock) Release(context.Context) error { l.s.Delete(l.key); return nil }

// constToken hands out the same fencing token every time.
type constToken struct{ shim.Notifier }

func (d *constToken) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	g, err := d.Driver.TryAcquire(ctx, req)
	g.Token = 1
	return g, err
}

// grantAlways grants even when another owner holds the key.
type grantAlways struct{ shim.Notifier }

func (d *grantAlways) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	g, err := d.Driver.TryAcquire(ctx, req)
	if err != nil && strings.Contains(err.Error(), "held by another owner") {
		return backend.Grant{Lock: nopLock{}, Token: 1 << 40}, nil
	}
	return g, err
}

type nopLock struct{}

func (nopLock) Refresh(context.Context, time.Duration) error { return nil }
func (nopLock) Release(context.Context) error                { return nil }

// refreshAlways reports success for every refresh, held or not.
type refreshAlways struct{ shim.Notifier }

func (d *refreshAlways) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	g, err := d.Driver.TryAcquire(ctx, req)
	if err == nil {
		g.Lock = refreshOK{g.Lock}
	}
	return g, err
}

type refreshOK struct{ backend.Lock }

func (refreshOK) Refresh(context.Context, time.Duration) error { return nil }

// kindBlind declares neither semaphores nor read-write locks and takes
// every request as the mutex's, the kind unread (a driver written before
// Request.Kind).
type kindBlind struct{ shim.Notifier }

func (d *kindBlind) Capabilities() backend.Capabilities {
	c := d.Driver.Capabilities()
	c.Semaphore, c.RW = "", ""
	return c
}
func (d *kindBlind) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	req.Kind = backend.Exclusive
	return d.Driver.TryAcquire(ctx, req)
}

// liar implements every optional interface wrongly: Inspect, List and
// ForceRelease see nothing held, RefreshAll succeeds for anything,
// Subscribe never announces, Withdraw does nothing, and Wait grants at
// once with a stale token.
type liar struct{ backend.Driver }

func (d *liar) Capabilities() backend.Capabilities {
	c := d.Driver.Capabilities()
	c.Wait, c.BatchRefresh, c.MultiAtomic = backend.WaitQueue, true, false
	return c
}
func (d *liar) TryAcquireMulti(context.Context, []backend.Request) ([]backend.Grant, error) {
	return nil, backend.ErrUnsupported
}
func (d *liar) Inspect(_ context.Context, key string, _ backend.Kind) (backend.Info, error) {
	return backend.Info{Key: key, Waiters: -1}, nil
}
func (d *liar) List(context.Context, string, int) ([]backend.Info, error) { return nil, nil }
func (d *liar) ForceRelease(_ context.Context, key string, _ backend.Forced) (backend.Info, error) {
	return backend.Info{Key: key, Waiters: -1}, backend.ErrNotHeld
}
func (d *liar) RefreshAll(_ context.Context, locks []backend.Lock, _ []time.Duration) []error {
	return make([]error, len(locks))
}
func (d *liar) Subscribe(context.Context, string, backend.Kind) (<-chan struct{}, func(), error) {
	return make(chan struct{}), func() {}, nil
}
func (d *liar) Withdraw(context.Context, backend.Request) error { return nil }
func (d *liar) Wait(context.Context, backend.Request) (backend.Grant, error) {
	return backend.Grant{Lock: nopLock{}, Token: 1}, nil
}

// naiveMulti is a multi-lock made of Acquires, with the classic bugs:
// keys taken in the order given (unsorted), keys already taken kept when
// a later one fails (keepPartial), and always: the loss of one key not
// ending the whole (Done closes only on Release).
type naiveMulti struct {
	unsorted, keepPartial bool
}

func (n *naiveMulti) acquireAll(ctx context.Context, l *distlock.Locker, keys []string, wait bool) (conformance.MultiLease, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("no keys: %w", distlock.ErrInvalidKey)
	}
	order := slices.Clone(keys)
	if !n.unsorted {
		slices.Sort(order)
	}
	order = dedup(order)
	m := &naiveLease{done: make(chan struct{})}
	owner := fmt.Sprintf("naive-multi-%d", time.Now().UnixNano())
	for i, k := range order {
		if i > 0 && n.unsorted {
			time.Sleep(20 * time.Millisecond) // a client with some latency
		}
		var le *distlock.Lease
		var err error
		if wait {
			le, err = l.Acquire(ctx, k, distlock.WithOwner(owner))
		} else {
			le, err = l.TryAcquire(ctx, k, distlock.WithOwner(owner))
		}
		if err != nil {
			if !n.keepPartial {
				_ = m.Release(context.WithoutCancel(ctx))
			}
			return nil, fmt.Errorf("key %q: %w", k, err)
		}
		m.leases = append(m.leases, le)
	}
	return m, nil
}

// dedup drops repeated keys, keeping the first of each.
func dedup(keys []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

type naiveLease struct {
	leases []*distlock.Lease
	done   chan struct{}
	once   sync.Once
}

func (m *naiveLease) Keys() []string {
	var out []string
	for _, le := range m.leases {
		out = append(out, le.Key())
	}
	slices.Sort(out)
	return out
}

func (m *naiveLease) Tokens() map[string]uint64 {
	out := map[string]uint64{}
	for _, le := range m.leases {
		out[le.Key()] = le.Token()
	}
	return out
}

func (m *naiveLease) Done() <-chan struct{} { return m.done }

func (m *naiveLease) Err() error {
	select {
	case <-m.done:
		return distlock.ErrReleased
	default:
		return nil
	}
}

func (m *naiveLease) Release(ctx context.Context) error {
	if m.Err() != nil {
		return distlock.ErrReleased
	}
	m.once.Do(func() { close(m.done) })
	var errs []error
	for _, le := range m.leases {
		errs = append(errs, le.Release(ctx))
	}
	return errors.Join(errs...)
}
