package redisproto

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/backoff"
)

// Notifier shares ONE pub/sub connection among every waiter of a Driver (of
// one Redis node, in Redlock mode). Channels are subscribed on first use and
// unsubscribed when their last waiter leaves. One goroutine reads the
// connection; it starts with the first subscription and stops in close.
type Notifier struct {
	client redis.UniversalClient

	mu      sync.Mutex
	ps      *redis.PubSub
	chans   map[string]*channelState
	idle    []idleEntry // channels kept subscribed with no waiter, oldest first
	nidle   int         // how many channels are idle
	closed  bool
	stop    chan struct{}
	stopped chan struct{}
}

// channelState tracks one subscribed channel.
type channelState struct {
	refs    int                        // waiters
	pending int                        // SUBSCRIBE commands not yet confirmed
	ready   chan struct{}              // closed once the last SUBSCRIBE is confirmed, or refused
	err     error                      // why Redis refused the subscription (refuse), else nil
	outs    map[chan<- struct{}]Filter // where to announce, with each one's Filter
	idle    bool                       // subscribed, no waiter, kept for reuse
	gen     int                        // counts idle periods, to spot stale idle entries
}

// Filter selects the messages a subscriber hears: every message when only
// is empty; else "released" and the messages starting with only, which are
// also passed to got (called with Notifier.mu held: it must not block).
type Filter struct {
	Only string
	Got  func(payload string)
}

// idleEntry is one idle period of a channel.
type idleEntry struct {
	channel string
	gen     int
}

// maxIdle is how many channels stay subscribed without waiters, so that a
// key waited for again and again (a contended lock) is not subscribed and
// unsubscribed each time: its next waiter needs no round trip.
const maxIdle = 256

func NewNotifier(c redis.UniversalClient) *Notifier {
	return &Notifier{client: c, chans: map[string]*channelState{}}
}

// subscribe starts announcing releases on channel to out (non-blocking
// sends; out should have a buffer of 1) and returns once Redis confirmed the
// subscription. With a non-empty f.only, out hears just the messages
// starting with f.only (a hand-off to one wait, also passed to f.got) and
// "released". Each out may be subscribed to a channel once. The returned
// cancel must be called once.
func (n *Notifier) Subscribe(ctx context.Context, channel string, out chan<- struct{}, f Filter) (func(), error) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, errClosed
	}
	n.start()
	st := n.chans[channel]
	if st == nil {
		st = &channelState{outs: map[chan<- struct{}]Filter{}}
		n.chans[channel] = st
	}
	st.refs++
	st.outs[out] = f
	switch {
	case st.idle:
		st.idle = false
		n.nidle--
	case st.refs == 1:
		st.ready = make(chan struct{})
		st.pending++
		if err := n.ps.Subscribe(ctx, channel); err != nil {
			st.pending--
			n.leaveLocked(ctx, channel, st, out, false)
			n.mu.Unlock()
			return nil, err
		}
	}
	ready := st.ready
	n.mu.Unlock()
	cancel := sync.OnceFunc(func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.leaveLocked(context.Background(), channel, st, out, true)
	})
	select {
	case <-ready:
		n.mu.Lock()
		err := st.err
		if err != nil {
			n.leaveLocked(ctx, channel, st, out, false)
		}
		n.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return cancel, nil
	case <-ctx.Done():
		cancel()
		return nil, context.Cause(ctx)
	}
}

// leaveLocked drops one waiter of channel. n.mu is held. The last waiter
// leaves the channel subscribed (idle) when keep is set, unsubscribing the
// oldest idle channel beyond maxIdle instead.
func (n *Notifier) leaveLocked(ctx context.Context, channel string, st *channelState, out chan<- struct{}, keep bool) {
	st.refs--
	delete(st.outs, out)
	if st.refs > 0 || n.closed {
		return
	}
	if keep {
		st.idle = true
		st.gen++
		n.nidle++
		n.idle = append(n.idle, idleEntry{channel, st.gen})
		if len(n.idle) > 4*maxIdle { // drop entries of channels in use again
			n.idle = slices.DeleteFunc(n.idle, func(e idleEntry) bool {
				cur := n.chans[e.channel]
				return cur == nil || !cur.idle || cur.gen != e.gen
			})
		}
		for n.nidle > maxIdle && len(n.idle) > 0 {
			e := n.idle[0]
			n.idle = n.idle[1:]
			if old := n.chans[e.channel]; old != nil && old.idle && old.gen == e.gen {
				old.idle = false
				n.nidle--
				n.unsubscribeLocked(ctx, e.channel, old)
			}
		}
		return
	}
	n.unsubscribeLocked(ctx, channel, st)
}

// unsubscribeLocked unsubscribes a channel nobody waits on. n.mu is held.
func (n *Notifier) unsubscribeLocked(ctx context.Context, channel string, st *channelState) {
	// Best effort: if this fails the connection is broken, and the
	// reconnect will not resubscribe a channel go-redis forgot.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	_ = n.ps.Unsubscribe(ctx, channel)
	cancel()
	if st.pending == 0 {
		delete(n.chans, channel)
	}
}

// start starts the reader on the first subscription. n.mu is held.
func (n *Notifier) start() {
	if n.ps != nil {
		return
	}
	n.ps = n.client.Subscribe(context.Background())
	n.stop, n.stopped = make(chan struct{}), make(chan struct{})
	go n.read(n.ps)
}

// read dispatches what the pub/sub connection receives until close.
func (n *Notifier) read(ps *redis.PubSub) {
	defer close(n.stopped)
	var bo backoff.Backoff
	for {
		msg, err := ps.Receive(context.Background())
		if err != nil {
			select {
			case <-n.stop:
				return
			default:
			}
			if NotAllowed(err) {
				// Redis refused the login (NOAUTH, WRONGPASS) or the ACL
				// the channel (NOPERM): no reconnect fixes that, so the
				// subscriptions still waiting for their confirmation fail
				// now instead of waiting out their ctx.
				n.refuse(err)
			}
			// The connection broke: releases may have been missed, so every
			// waiter re-checks. go-redis reconnects and resubscribes on the
			// next Receive; back off while the server is unreachable.
			n.broadcast()
			select {
			case <-n.stop:
				return
			case <-time.After(bo.Next(10*time.Millisecond, time.Second)):
			}
			continue
		}
		bo.Reset()
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				n.confirmed(m.Channel)
			}
		case *redis.Message:
			n.announce(m.Channel, m.Payload)
		}
	}
}

// confirmed records Redis's reply to one SUBSCRIBE of channel.
func (n *Notifier) confirmed(channel string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	st := n.chans[channel]
	if st == nil {
		return
	}
	if st.pending > 0 {
		st.pending--
	}
	if st.pending > 0 {
		return
	}
	select {
	case <-st.ready:
	default:
		close(st.ready)
	}
	if st.refs == 0 && !st.idle {
		delete(n.chans, channel)
	}
}

// refuse fails every subscription still waiting for Redis's confirmation
// with err.
func (n *Notifier) refuse(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, st := range n.chans {
		if st.pending == 0 {
			continue
		}
		st.pending = 0
		st.err = err
		select {
		case <-st.ready:
		default:
			close(st.ready)
		}
	}
}

// announce wakes the waiters of channel that want payload.
func (n *Notifier) announce(channel, payload string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if st := n.chans[channel]; st != nil {
		for out, f := range st.outs {
			switch {
			case f.Only == "" || payload == "released":
				wake(out)
			case strings.HasPrefix(payload, f.Only):
				if f.Got != nil {
					f.Got(payload)
				}
				wake(out)
			}
		}
	}
}

// broadcast wakes every waiter.
func (n *Notifier) broadcast() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, st := range n.chans {
		for out := range st.outs {
			wake(out)
		}
	}
}

func wake(out chan<- struct{}) {
	select {
	case out <- struct{}{}:
	default:
	}
}

// close stops the reader and closes the pub/sub connection; waiters still
// subscribed are woken and see errors on their next attempt.
func (n *Notifier) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	ps, stop, stopped := n.ps, n.stop, n.stopped
	for _, st := range n.chans {
		for out := range st.outs {
			wake(out)
		}
	}
	n.mu.Unlock()
	if ps == nil {
		return nil
	}
	close(stop)
	err := ps.Close()
	<-stopped
	if errors.Is(err, redis.ErrClosed) {
		err = nil
	}
	return err
}

// errClosed is what a Notifier closed already answers a subscription.
var errClosed = fmt.Errorf("the pub/sub connection is closed: %w", backend.ErrClosed)
