package distlock

import (
	"container/heap"
	"time"
)

// The watchdog's queue: every held hold waits on one heap, ordered by its
// next event (its renewal, or its deadline), and a change of schedule
// wakes the loop (watchdog.go) only when it must look sooner. The engine's
// files above call reschedule and remove; this file calls none of them.

// The watchdog is one goroutine per Locker that renews every auto-renewed
// lease at a third of its TTL and declares any lease lost when its
// client-side validity runs out. Due renewals are sent together: in one
// round trip where the driver declares BatchRefresh (backend.Batcher), else with
// bounded concurrency. A Locker holding thousands of leases therefore runs
// one timer, not thousands.
type watchdog struct {
	queue   holdHeap // holds waiting for their next event; guarded by Locker.mu
	kick    chan struct{}
	started bool
	// wakeAt is when the loop looks at the queue next at the latest (zero:
	// unknown); guarded by Locker.mu. A hold due no earlier needs no kick,
	// so acquisitions and renewals do not wake the loop each time.
	wakeAt time.Time
	wakes  int // times the loop looked at the queue (tests); guarded by Locker.mu
	// closing: Close has begun. Nothing is renewed any more, but the loop
	// goes on ending leases whose validity runs out until Close has
	// released every lease (it closes stop then): a lease Close has not
	// reached yet is lost at its deadline, as it would be without Close.
	// Guarded by Locker.mu.
	closing bool
	stop    chan struct{}
}

func (w *watchdog) init() {
	w.kick = make(chan struct{}, 1)
	w.stop = make(chan struct{})
}

// close stops renewals: every hold's next event becomes its deadline.
// Locker.mu is held.
func (w *watchdog) close() {
	w.closing = true
	for _, h := range w.queue {
		h.autoRenew, h.doubt.checking = false, false
	}
	heap.Init(&w.queue)
	w.wakeAt = time.Time{}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// next returns when h needs attention: its renewal, or its deadline. A
// hold whose renewal is in flight stays on the queue, watched for its
// deadline only: the portable layer ends it then whatever the driver's
// call does (a store client may ignore ctx and answer late, or never).
func (h *hold) next() time.Time {
	if !h.renewing && (h.autoRenew || h.doubt.checking) && h.nextRenew.Before(h.deadline) {
		return h.nextRenew
	}
	return h.deadline
}

// reschedule (re)places h on the queue and wakes the loop if h is due
// before the loop would look next. Locker.mu is held.
func (w *watchdog) reschedule(h *hold) {
	if h.state != holdHeld {
		return
	}
	if w.closing {
		h.autoRenew, h.doubt.checking = false, false // watched for its deadline only
	}
	if h.heapIndex >= 0 {
		heap.Fix(&w.queue, h.heapIndex)
	} else {
		heap.Push(&w.queue, h)
	}
	if next := h.next(); w.wakeAt.IsZero() || next.Before(w.wakeAt) {
		w.wakeAt = next
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// remove takes h off the queue. Locker.mu is held.
func (w *watchdog) remove(h *hold) {
	if h.heapIndex >= 0 {
		heap.Remove(&w.queue, h.heapIndex)
	}
}

// holdHeap orders holds by their next event.
type holdHeap []*hold

func (q holdHeap) Len() int { return len(q) }

func (q holdHeap) Less(i, j int) bool { return q[i].next().Before(q[j].next()) }

func (q holdHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].heapIndex, q[j].heapIndex = i, j
}

func (q *holdHeap) Push(x any) {
	h := x.(*hold)
	h.heapIndex = len(*q)
	*q = append(*q, h)
}

func (q *holdHeap) Pop() any {
	old := *q
	h := old[len(old)-1]
	old[len(old)-1] = nil
	h.heapIndex = -1
	*q = old[:len(old)-1]
	return h
}
