package distlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/backend"
)

// Leader election, built on the mutex: an election named N is the lock
// N, its leader is the lock's holder, and its term is the holder's
// fencing token. It therefore works on every backend, with the mutex's
// guarantees (renewal, doubt, loss before the store can grant the lock to
// anyone else, tokens that strictly increase) and its costs: a campaign
// waits as Acquire does (the store's queue, notifications or polling), and
// Leader and Observe read the lock with the driver's backend.Inspector.
// docs/primitives.md says what that means per store.

// MaxCandidateValueLen is the longest value, in bytes, a candidate may
// campaign with: the value and a random suffix (which keeps two
// candidates with the same value apart) form the lock's owner id, at most
// 128 bytes.
const MaxCandidateValueLen = 128 - ownerSuffixLen

// ownerSuffixLen is the length of ".<32 hex digits>" appended to a
// candidate's value.
const ownerSuffixLen = 1 + 32

// ErrNoLeader: no candidate leads the election now.
var ErrNoLeader = errors.New("no leader")

// ErrCampaigning: a Campaign of this Election is already under way, or
// this Election leads (Election.Leadership returns its Leadership). One
// Election campaigns once at a time; make another Election for another
// candidate.
var ErrCampaigning = errors.New("this Election is already campaigning or leading")

// An Election is one candidate's handle on the election named by its
// name, made by Locker.Election. It is safe for concurrent use. Every
// Election with the same name on the same store takes part in the same
// election, whichever Locker or process made it.
type Election struct {
	l        *Locker
	name     string
	opts     []Option
	interval time.Duration

	err error // an option refused (Election returns it)

	mu          sync.Mutex
	campaigning bool
	cur         *Leadership
}

// Election returns a handle on the election called name (a key: the
// election is the lock of that name, so do not use name as a lock of its
// own). It sends nothing to the store. It fails with ErrInvalidKey for a
// name no store may see and with ErrInvalidConfig, naming the option, for
// an option it refuses.
func (l *Locker) Election(name string, opts ...ElectionOption) (*Election, error) {
	if err := checkKey(name, l.maxKey); err != nil {
		return nil, fmt.Errorf("distlock: election: %w", err)
	}
	e := &Election{l: l, name: name, interval: defaultObserveInterval}
	for _, o := range opts {
		o(e)
	}
	if e.err != nil {
		return nil, fmt.Errorf("distlock: election %q: %w", name, e.err)
	}
	return e, nil
}

// Name returns the election's name.
func (e *Election) Name() string { return e.name }

// CheckCandidateValue reports why value cannot be a candidate's value:
// it must be 1 to MaxCandidateValueLen bytes of printable ASCII without
// spaces (the characters of an owner id). Campaign calls it.
func CheckCandidateValue(value string) error {
	if value == "" || len(value) > MaxCandidateValueLen {
		return fmt.Errorf("%w: candidate value must be 1 to %d bytes, got %d", ErrInvalidConfig, MaxCandidateValueLen, len(value))
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("%w: candidate value %q must be printable ASCII without spaces (byte %d is 0x%02x)", ErrInvalidConfig, value, i, c)
		}
	}
	return nil
}

// Campaign makes this candidate leader, waiting until it is elected or
// ctx ends (the error then wraps ctx's, and nothing of the campaign stays
// queued in the store). value is what Leader and Observe report for this
// candidate to every participant (a host name, an address); see
// CheckCandidateValue. Candidates with the same value are still distinct
// candidates: each lock is taken under the value and a random suffix.
//
// One Election campaigns once at a time: a Campaign while another is under
// way or while this Election leads returns an error matching
// ErrCampaigning. Once its Leadership has ended (resigned or lost) the
// Election may campaign again.
func (e *Election) Campaign(ctx context.Context, value string) (*Leadership, error) {
	if err := CheckCandidateValue(value); err != nil {
		return nil, fmt.Errorf("distlock: campaign %q: %w", e.name, err)
	}
	e.mu.Lock()
	if e.campaigning || (e.cur != nil && e.cur.le.Err() == nil) {
		e.mu.Unlock()
		return nil, fmt.Errorf("distlock: campaign %q: %w", e.name, ErrCampaigning)
	}
	e.campaigning = true
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.campaigning = false
		e.mu.Unlock()
	}()
	owner := value + "." + newOwner()
	opts := append(append([]Option(nil), e.opts...), WithOwner(owner))
	le, err := e.l.acquirePrim(ctx, e.name, opts, true, primElection)
	if err != nil {
		return nil, fmt.Errorf("distlock: campaign %q: %w", e.name, err)
	}
	ld := &Leadership{le: le, value: value}
	e.mu.Lock()
	e.cur = ld
	e.mu.Unlock()
	return ld, nil
}

// Leadership returns this Election's current Leadership, or nil if it
// has none that has not ended.
func (e *Election) Leadership() *Leadership {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur == nil || e.cur.le.Err() != nil {
		return nil
	}
	return e.cur
}

// LeaderInfo says who leads an election.
type LeaderInfo struct {
	// Leading reports whether a candidate leads; the other fields are
	// zero when none does.
	Leading bool
	// Value is the leader's value as given to Campaign. It is the whole
	// Owner when the lock was taken by something other than a Campaign,
	// and "" when the store cannot tell who holds the lock (sqllock after
	// its token counter was evicted).
	Value string
	// Owner is the owner id the leader's lock is held under.
	Owner string
	// Term is the leader's fencing token (Leadership.Term); 0 when the
	// store cannot tell.
	Term uint64
}

// infoOf turns a lock's Info into a LeaderInfo.
func infoOf(in backend.Info) LeaderInfo {
	if !in.Held {
		return LeaderInfo{}
	}
	return LeaderInfo{Leading: true, Value: valueOf(in.Owner), Owner: in.Owner, Term: in.Token}
}

// valueOf strips a campaign's random suffix from owner.
func valueOf(owner string) string {
	n := len(owner) - ownerSuffixLen
	if n < 1 || owner[n] != '.' {
		return owner
	}
	for _, c := range owner[n+1:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return owner
		}
	}
	return owner[:n]
}

// inspector returns the driver's Inspector, or an ErrUnsupported error.
func (e *Election) inspector(op string) (backend.Inspector, error) {
	in, ok := e.l.d.(backend.Inspector)
	if !ok {
		return nil, fmt.Errorf("distlock: %s %q: %w: the %s backend cannot read a lock's holder (no backend.Inspector)", op, e.name, ErrUnsupported, e.l.caps.Name)
	}
	return in, nil
}

// Leader reports who leads the election now, as the store says (one
// Inspect of the lock: a snapshot that may be stale by the time it
// returns). It returns an error matching ErrNoLeader when no candidate
// leads, and one matching ErrUnsupported on a backend that cannot read a
// lock's holder (Redlock).
func (e *Election) Leader(ctx context.Context) (LeaderInfo, error) {
	in, err := e.inspector("leader")
	if err != nil {
		return LeaderInfo{}, err
	}
	info, err := in.Inspect(ctx, e.name, backend.Exclusive)
	if err != nil {
		return LeaderInfo{}, fmt.Errorf("distlock: leader %q: %w", e.name, err)
	}
	if !info.Held {
		return LeaderInfo{}, fmt.Errorf("distlock: leader %q: %w", e.name, ErrNoLeader)
	}
	return infoOf(info), nil
}

// Observe returns a channel that receives who leads the election: the
// state when Observe starts, then each change (a new leader, a new term of
// the same value, or no leader, LeaderInfo.Leading false). It reads the
// lock every WithObserveInterval, and at once after the store announces a
// release where the driver can (backend.Notifier). Changes shorter than
// the interval may be missed; a reader that falls behind gets the latest
// state, not every one (the channel holds one). A read that fails is
// retried at the next interval and reports nothing. The channel is closed
// when ctx ends or the Locker closes. Observe returns an error matching
// ErrUnsupported on a backend that cannot read a lock's holder.
func (e *Election) Observe(ctx context.Context) (<-chan LeaderInfo, error) {
	in, err := e.inspector("observe")
	if err != nil {
		return nil, err
	}
	if !e.l.begin() {
		return nil, fmt.Errorf("distlock: observe %q: %w", e.name, ErrClosed)
	}
	ctx, bound := e.l.bindClose(ctx)
	ch := make(chan LeaderInfo, 1)
	go func() {
		defer e.l.ops.Done()
		defer bound.stop()
		defer close(ch)
		e.observe(ctx, in, ch)
	}()
	return ch, nil
}

func (e *Election) observe(ctx context.Context, in backend.Inspector, ch chan LeaderInfo) {
	var wake <-chan struct{}
	if n, ok := e.l.d.(backend.Notifier); ok && e.l.caps.Wait == backend.WaitNotify {
		if w, cancel, err := n.Subscribe(ctx, e.name, backend.Exclusive); err == nil {
			wake = w
			defer cancel()
		}
	}
	var last LeaderInfo
	first := true
	soon := 0 // reads left at a short interval after a wake-up
	for {
		rctx, cancel := context.WithTimeout(ctx, max(e.interval, time.Second))
		info, err := in.Inspect(rctx, e.name, backend.Exclusive)
		cancel()
		if err == nil {
			if li := infoOf(info); first || li != last {
				first, last = false, li
				select { // keep only the latest for a slow reader
				case <-ch:
				default:
				}
				ch <- li
			}
		}
		d := e.interval
		if soon > 0 {
			soon--
			d = min(d, 20*time.Millisecond<<(4-soon))
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-wake:
			soon = 4 // a successor usually takes office within a few round trips
		case <-t.C:
		}
		t.Stop()
	}
}

// A Leadership is a term of office won by Campaign. It ends when
// resigned, when its lease is lost (Err then matches ErrLost), or when its
// Locker closes. It is safe for concurrent use.
type Leadership struct {
	le    *Lease
	value string
}

// Value returns the value this leader campaigned with.
func (ld *Leadership) Value() string { return ld.value }

// Term returns the leader's term: the fencing token of the lock behind the
// election, strictly greater than every earlier leader's term (where the
// store's tokens are, see docs/safety.md). Pass it to the resources the
// leader writes so that they reject a deposed leader.
func (ld *Leadership) Term() uint64 { return ld.le.Token() }

// Owner returns the owner id the leader's lock is held under (the value
// and a random suffix), as LeaderInfo.Owner reports it.
func (ld *Leadership) Owner() string { return ld.le.Owner() }

// Done returns a channel closed when the leadership ends.
func (ld *Leadership) Done() <-chan struct{} { return ld.le.Done() }

// Err returns nil while this candidate leads, an error matching
// ErrReleased after Resign or the Locker's Close, or one matching ErrLost
// (wrapping the cause) once leadership was lost.
func (ld *Leadership) Err() error { return ld.le.Err() }

// State reports whether the leadership is held, in doubt, lost or
// resigned (StateReleased), as Lease.State does.
func (ld *Leadership) State() State { return ld.le.State() }

// Context returns a context canceled when the leadership ends, whose cause
// is Err. Run the leader's work under it.
func (ld *Leadership) Context() context.Context { return ld.le.Context() }

// Lease returns the lease behind the leadership (its Key, Token and
// Permits besides what Leadership has itself). Releasing it is resigning.
func (ld *Leadership) Lease() *Lease { return ld.le }

// Locker returns the Locker that holds the leadership's lease.
func (ld *Leadership) Locker() *Locker { return ld.le.Locker() }

// Deadline returns the end of the leadership's client-side validity, as
// Lease.Deadline does: it is lost then unless a renewal succeeds first.
func (ld *Leadership) Deadline() time.Time { return ld.le.Deadline() }

// Refresh extends the leadership's lease, as Lease.Refresh does.
func (ld *Leadership) Refresh(ctx context.Context, ttl time.Duration) error {
	return ld.le.Refresh(ctx, ttl)
}

// Release is Resign, under the name Held has for it: a helper over Held
// that releases a Leadership resigns it.
func (ld *Leadership) Release(ctx context.Context) error { return ld.Resign(ctx) }

// Resign gives up the leadership: the lock is released and the next
// candidate can be elected at once. Resigning twice returns an error
// matching ErrReleased; resigning a lost leadership returns its Err.
func (ld *Leadership) Resign(ctx context.Context) error {
	if err := ld.le.Release(ctx); err != nil {
		return fmt.Errorf("distlock: resign: %w", err)
	}
	return nil
}
