package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
)

// Driver is a backend.Driver over N independent Redis primaries (the
// Redlock algorithm): a lock is held when a majority (N/2+1) of them granted
// it within its TTL, and fencing tokens come from a majority too (see
// docs/redis.md for the argument and its limits). It implements
// backend.Notifier, backend.Batcher and, in queue mode (the
// default), backend.Waiter: waiters queue on the first node (see Wait). It
// is safe for concurrent use.
type Driver struct {
	nodes  []*node
	all    []int // every node's index
	quorum int
	inbox  string // queue mode: the channel on the first node hand-offs to this driver's waiters go to
	owned  bool
	opts   Options
	caps   backend.Capabilities

	// bg counts the node-call workers (goNode), which run calls on after
	// their caller stopped waiting, too. A worker starts only under bgMu
	// while closing is unset, and Close sets closing under bgMu before it
	// waits: no worker starts (bg.Add from zero) concurrently with that
	// Wait.
	bgMu    sync.Mutex
	closing bool
	bg      sync.WaitGroup
	// Node calls run on worker goroutines that outlive a call (see
	// goNode): tasks hands a call to an idle worker, quit (closed by
	// Close) ends the idle ones. Each worker is counted in bg.
	tasks chan func()
	quit  chan struct{}

	busyMu sync.Mutex
	busy   map[string]busyKey // keys whose attempts met another holder lately

	closeOnce sync.Once
	closeErr  error
}

// node is one Redis primary of a Redlock.
type node struct {
	c      redis.UniversalClient
	notify *redisproto.Notifier
}

var (
	_ backend.Driver   = (*Driver)(nil)
	_ backend.Notifier = (*Driver)(nil)
	_ backend.Batcher  = (*Driver)(nil)
)

// Redlock timing, as in the Redlock description: the clock-drift margin is
// 1% of the TTL plus 2ms; each node gets a fraction of the TTL to answer, so
// one unresponsive node cannot eat the whole validity.
const (
	driftFactor  = 0.01
	driftFixed   = 2 * time.Millisecond
	minNodeWait  = 50 * time.Millisecond
	nodeWaitFrac = 3
)

// New returns a Redlock driver over clients, one per independent
// primary (at least 1; 3 or 5 in practice). The driver never closes them.
// Options.Wait defaults to WaitQueue: waiters queue on the first node (see Wait).
//
// Each node call is bounded by the caller's ctx and the node's share of
// the TTL whatever the client does (see eachNode); what the clients need
// is what redislock.New says of its client, and New logs redislock.New's
// warning (Options.Logger, else slog.Default()) for each client that does
// not end calls at their ctx's deadline, with the node's index.
func New(clients []redis.UniversalClient, opts *Options) (*Driver, error) {
	if len(clients) == 0 {
		return nil, fmt.Errorf("redlock: %w: Redlock needs at least one client", backend.ErrInvalidConfig)
	}
	o, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	r := &Driver{quorum: len(clients)/2 + 1, opts: o, busy: map[string]busyKey{}, inbox: o.Prefix + ":inbox:" + redisproto.NewID(),
		tasks: make(chan func()), quit: make(chan struct{})}
	for _, c := range clients {
		if c == nil {
			return nil, fmt.Errorf("redlock: %w: nil client", backend.ErrInvalidConfig)
		}
		r.all = append(r.all, len(r.nodes))
		r.nodes = append(r.nodes, &node{c: c, notify: redisproto.NewNotifier(c)})
	}
	lg := o.Logger
	if lg == nil {
		lg = slog.Default()
	}
	for i, c := range clients {
		redisproto.BoundsOf(c).Warn(lg.With("node", i), "redlock")
	}
	r.caps = backend.Capabilities{
		Name:                "redlock",
		Server:              redisproto.ServerOf(clients[0]), // the first node
		Wait:                backend.WaitNotify,
		Fair:                o.Wait == WaitQueue,
		Lifetime:            backend.LifetimeTTL,
		PerLockTTL:          true,
		MinTTL:              redisproto.MinTTL,
		MaxTTL:              redisproto.MaxTTL,
		CrossProcessReentry: true,
		Replication:         fmt.Sprintf("Redlock: majority (%d of %d) of independent primaries", r.quorum, len(clients)),
		BatchRefresh:        true, // redlock_lock.go
		ForceRelease:        true, // force.go
	}
	if o.Wait == WaitQueue {
		r.caps.Wait = backend.WaitQueue
	}
	return r, nil
}

// Capabilities implements backend.Driver.
func (r *Driver) Capabilities() backend.Capabilities { return r.caps }

// Close stops the pub/sub connections and closes the clients if the driver
// opened them from a URL. It returns once every node call already started
// has ended; a call that would start after it fails with ErrClosed.
func (r *Driver) Close() error {
	r.closeOnce.Do(func() {
		r.bgMu.Lock()
		r.closing = true
		close(r.quit)
		r.bgMu.Unlock()
		var errs []error
		for _, n := range r.nodes {
			errs = append(errs, n.notify.Close())
			if r.owned {
				errs = append(errs, redisproto.IgnoreClosed(n.c.Close()))
			}
		}
		r.bg.Wait()
		r.closeErr = errors.Join(errs...)
	})
	return r.closeErr
}

func (r *Driver) keys(key string) redisproto.Keyset { return redisproto.KeysFor(r.opts.Prefix, key) }

// Subscribe implements backend.Notifier for the mutex (Redlock has no
// other kind): it subscribes on every node (each node's one shared pub/sub
// connection) and succeeds when at least one confirmed; a release is
// announced on every node that freed the lock.
func (r *Driver) Subscribe(ctx context.Context, key string, kind backend.Kind) (<-chan struct{}, func(), error) {
	if kind != backend.Exclusive {
		return nil, nil, backend.UnsupportedKind("redlock", "subscribe", kind)
	}
	ch := r.keys(key).Channel
	out := make(chan struct{}, 1)
	cancels, errs := eachNode(r, ctx, time.Second, func(ctx context.Context, _ int, n *node) (func(), error) {
		return n.notify.Subscribe(ctx, ch, out, redisproto.Filter{})
	}, func(cancel func()) {
		if cancel != nil {
			cancel() // confirmed too late to be counted
		}
	})
	cancel := func() {
		for _, c := range cancels {
			if c != nil {
				c()
			}
		}
	}
	for _, c := range cancels {
		if c != nil {
			return out, cancel, nil
		}
	}
	return nil, nil, fmt.Errorf("redlock: subscribe %q: %w: no node confirmed: %w", key, backend.ErrUnavailable, errors.Join(errs...))
}

// Withdraw implements backend.Notifier: Redlock grants no Write, so its
// attempts leave no writer-waiting mark to remove.
func (r *Driver) Withdraw(context.Context, backend.Request) error { return nil }
