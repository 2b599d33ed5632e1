package distlock

import (
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// EventKind names a change in a lease's life.
type EventKind int

const (
	// EventAcquired: the lock was taken in the store. Re-entries of a
	// held lock are not events: they share the first acquisition's hold.
	EventAcquired EventKind = iota + 1
	// EventInDoubt: the lease went in doubt (Lease.State reports
	// StateInDoubt): a renewal failed or went unanswered, or the backend
	// lost contact with the store. Event.Cause says why and
	// Event.Deadline until when the lease is valid at most. Work that must
	// not run without the lock should pause.
	EventInDoubt
	// EventRestored: a lease in doubt is held again.
	EventRestored
	// EventLost: the lease ended without Release; Event.Cause matches
	// ErrLost and wraps what ended it, as Lease.Err does.
	EventLost
	// EventReleased: the lock was released in the store: the last Lease
	// on it was released, or the Locker closed (Event.Cause then matches
	// ErrClosed). If the store could not be reached, Event.Cause is that
	// error and the lock expires by its TTL.
	EventReleased
)

// String returns the kind's name as the metrics and spans record it:
// acquired, in_doubt, restored, lost, released.
func (k EventKind) String() string {
	switch k {
	case EventAcquired:
		return "acquired"
	case EventInDoubt:
		return "in_doubt"
	case EventRestored:
		return "restored"
	case EventLost:
		return "lost"
	case EventReleased:
		return "released"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// An Event is a change in the life of a lock this Locker holds, as given
// to the function set with WithEvents. Events describe the hold shared by
// a lock's re-entries, once per change.
type Event struct {
	Kind  EventKind
	Key   string
	Owner string
	Token uint64
	// Time is when the change happened, which may be a little before fn is
	// called.
	Time time.Time
	// Deadline is the end of the lease's client-side validity after the
	// change (as Lease.Deadline); zero once the lease has ended.
	Deadline time.Time
	// Cause says why, for EventInDoubt, EventLost and EventReleased; nil
	// otherwise.
	Cause error

	h    *hold             // identifies the hold, for the doubt spans
	link trace.SpanContext // the span of the acquisition that took the lock
}

// eventQueue delivers events in order on one goroutine, started on the
// first event, so that neither the user's callback nor a span exporter
// runs under Locker.mu or makes the Locker wait. The queue has no bound:
// the Locker never blocks on it.
type eventQueue struct {
	deliver func(Event)

	mu      sync.Mutex
	pending []Event
	started bool
	closed  bool
	wake    chan struct{}
	done    chan struct{}
}

func newEventQueue(deliver func(Event)) *eventQueue {
	return &eventQueue{deliver: deliver, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// push queues ev. Events pushed after close are dropped (none are: Close
// closes the queue once every hold has ended).
func (q *eventQueue) push(ev Event) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.pending = append(q.pending, ev)
	if !q.started {
		q.started = true
		go q.run()
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *eventQueue) run() {
	defer close(q.done)
	for {
		q.mu.Lock()
		batch, closed := q.pending, q.closed
		q.pending = nil
		q.mu.Unlock()
		for _, ev := range batch {
			q.deliver(ev)
		}
		if len(batch) > 0 {
			continue
		}
		if closed {
			return
		}
		<-q.wake
	}
}

// close delivers what is queued and returns when the goroutine has exited.
func (q *eventQueue) close() {
	q.mu.Lock()
	q.closed = true
	started := q.started
	q.mu.Unlock()
	if !started {
		return
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
	<-q.done
}
