package distlock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
)

// Who leads an election, as the store says: Leader reads it once, Observe
// follows it, pushed by the store where its driver watches
// (backend.Announcer), else by reading it at an interval.

// LeaderInfo says who leads an election.
type LeaderInfo struct {
	// Leading reports whether a candidate leads; the other fields are
	// zero when none does.
	Leading bool
	// Value is the leader's value: the last it proclaimed
	// (Leadership.Proclaim), else as given to Campaign. It is the whole
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
	v := in.Value
	if v == "" {
		v = valueOf(in.Owner)
	}
	return LeaderInfo{Leading: true, Value: v, Owner: in.Owner, Term: in.Token}
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

// inspector returns the driver's Inspector, or an ErrUnsupported error
// when it cannot read a lock's holder (Capabilities.Inspect).
func (e *Election) inspector(op string) (backend.Inspector, error) {
	if !e.l.caps.Inspect { // declared, and the driver is an Inspector (Offers)
		return nil, fmt.Errorf("distlock: %s %q: %w: the %s backend cannot read a lock's holder (Capabilities.Inspect)", op, e.name, ErrUnsupported, e.l.caps.Name)
	}
	return e.l.d.(backend.Inspector), nil
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
// the same value, a value proclaimed, or no leader, LeaderInfo.Leading
// false). Where the store pushes the changes of a lock's holder
// (backend.Capabilities.Watch: docs/primitives.md lists the stores) it
// reads the lock after each one, and when the leader's TTL runs out
// (an expiry some stores do not announce), and polls only while the
// store's watch is down. Elsewhere it reads the lock every
// WithObserveInterval, and at once after the store announces a release
// where the driver can (backend.Notifier); changes shorter than the
// interval may then be missed. A reader that falls behind gets the latest
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
	o := &observer{e: e, in: in, ch: ch}
	if a, ok := e.l.d.(backend.Announcer); ok && e.l.caps.Watch {
		o.an = a
	}
	go func() {
		defer e.l.ops.Done()
		defer bound.stop()
		defer close(ch)
		defer o.stop()
		o.run(ctx)
	}()
	return ch, nil
}

// An observer is one Observe's loop and what it listens to.
type observer struct {
	e  *Election
	in backend.Inspector
	an backend.Announcer // the driver's watch (Capabilities.Watch), or nil
	ch chan LeaderInfo

	wake     <-chan struct{} // the watch's pushes, or the Notifier's releases
	cancel   func()          // ends what wake listens to
	watching bool            // wake is the watch's
	notified bool            // the Notifier was subscribed (once)
	soon     int             // reads left at a short interval after a release
}

func (o *observer) run(ctx context.Context) {
	var last LeaderInfo
	first := true
	for {
		o.listen(ctx)
		rctx, cancel := context.WithTimeout(ctx, max(o.e.interval, time.Second))
		info, err := o.in.Inspect(rctx, o.e.name, backend.Exclusive)
		cancel()
		if err == nil {
			if li := infoOf(info); first || li != last {
				first, last = false, li
				select { // keep only the latest for a slow reader
				case <-o.ch:
				default:
				}
				o.ch <- li
			}
		}
		if !o.sleep(ctx, o.next(info, err)) {
			return
		}
	}
}

// listen watches the lock where the store can (again, after a watch
// ended), else subscribes once to its releases where the store announces
// them.
func (o *observer) listen(ctx context.Context) {
	if o.an != nil && !o.watching {
		if w, cancel, err := o.an.Watch(ctx, o.e.name); err == nil {
			o.stop()
			o.wake, o.cancel, o.watching = w, cancel, true
			return
		}
	}
	n, ok := o.e.l.d.(backend.Notifier)
	if o.wake != nil || o.notified || !ok || o.e.l.caps.Wait != backend.WaitNotify {
		return
	}
	o.notified = true
	if w, cancel, err := n.Subscribe(ctx, o.e.name, backend.Exclusive); err == nil {
		o.wake, o.cancel = w, cancel
	}
}

// next returns how long to wait before reading the lock again unless
// woken (0: only when woken). Watching, that is the holder's TTL, whose
// expiry the store may not announce; else the interval, shorter for a few
// reads after a release (a successor usually takes office within a few
// round trips).
func (o *observer) next(info backend.Info, err error) time.Duration {
	if o.watching && err == nil {
		if info.Held {
			return info.TTL // 0 (unknown): the store announces its end
		}
		return 0
	}
	d := o.e.interval
	if o.soon > 0 {
		o.soon--
		d = min(d, 20*time.Millisecond<<(4-o.soon))
	}
	return d
}

// sleep waits d (forever if 0) or until woken; false once ctx ended.
func (o *observer) sleep(ctx context.Context, d time.Duration) bool {
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case _, ok := <-o.wake:
		switch {
		case !ok: // the watch ended: poll until it is back
			o.stop()
		case !o.watching:
			o.soon = 4
		}
	case <-timeout:
	}
	return true
}

// stop ends what the observer listens to.
func (o *observer) stop() {
	if o.cancel != nil {
		o.cancel()
	}
	o.wake, o.cancel, o.watching = nil, nil, false
}
