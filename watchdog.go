package distlock

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/distlock/distlock/backend"
)

// The watchdog's loop: it wakes for the next hold due on its queue
// (schedule.go), ends the holds past their deadline (loss.go), and sends
// the due renewals together, recording each answer as it comes: extended
// or in doubt (doubt.go), or lost.

// maxParallelRefresh bounds concurrent Refresh calls for drivers without
// batching.
const maxParallelRefresh = 16

// startWatchdog starts the loop once, on the first held lease. Locker.mu is held.
func (l *Locker) startWatchdog() {
	if l.wd.started || l.closed {
		return
	}
	l.wd.started = true
	l.goBackground(l.watch)
}

func (l *Locker) watch() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		due, lost, causes, wait := l.collect(time.Now())
		for i, h := range lost {
			l.lose(h, causes[i])
		}
		if len(due) > 0 {
			l.goCall(func() { l.renew(due) })
		}
		timer.Reset(wait)
		select {
		case <-l.wd.stop:
			return
		case <-l.wd.kick:
		case <-timer.C:
		}
	}
}

// renewableEarly reports whether h, though not yet due, may join a batch
// going out now: its renewal is due within a sixth of its TTL, so renewing
// it early costs little and saves a round trip later. Batches then stay
// aligned: leases renewed together are due together.
func (h *hold) renewableEarly(now time.Time) bool {
	return h.autoRenew && !h.renewing && h.nextRenew.Sub(now) <= h.ttl/6 && now.Before(h.deadline)
}

// collect pops the holds whose event is due at now: those past their
// deadline are returned as lost with the cause, those due for renewal are
// marked renewing and put back on the queue, where they wait for their
// deadline until the renewal's answer. It returns how long to sleep until
// the next event.
func (l *Locker) collect(now time.Time) (due, lost []*hold, causes []error, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.wd.wakes++
	defer func() {
		for _, h := range due {
			heap.Push(&l.wd.queue, h) // watched for its deadline meanwhile
			if dl := h.deadline; dl.Before(l.wd.wakeAt) {
				l.wd.wakeAt, wait = dl, dl.Sub(now)
			}
		}
	}()
	for len(l.wd.queue) > 0 {
		h := l.wd.queue[0]
		if h.next().After(now) && !(len(due) > 0 && h.renewableEarly(now)) {
			l.wd.wakeAt = h.next()
			return due, lost, causes, h.next().Sub(now)
		}
		heap.Pop(&l.wd.queue)
		if !now.Before(h.deadline) {
			lost, causes = append(lost, h), append(causes, h.doubt.ranOut("renewed"))
			continue
		}
		h.renewing, h.renewAt = true, now
		due = append(due, h)
	}
	if l.wd.wakeAt.After(now) {
		// The queue emptied before a wake-up planned for a hold that was
		// released since. Keep that wake-up: the next acquisition, most
		// likely due no earlier, then needs no kick (with an hour here,
		// each acquisition of a program that takes and releases locks one
		// after another would wake the loop, a thread hand-off each time).
		return due, lost, causes, l.wd.wakeAt.Sub(now)
	}
	l.wd.wakeAt = now.Add(time.Hour)
	return due, lost, causes, time.Hour
}

// renew refreshes due holds. Each refresh is bounded by its own hold's
// deadline (a batch sent in one round trip, by the latest of its holds'):
// one lease's deadline never cuts short another's refresh. The deadline
// itself is the watchdog's: a hold whose refresh is still out when its
// validity runs out is lost then, from the queue, whatever the driver does
// with the ctx, and the late answer changes nothing. Each answer is
// recorded as it comes.
func (l *Locker) renew(due []*hold) {
	locks := make([]backend.Lock, len(due))
	ttls := make([]time.Duration, len(due))
	deadlines := make([]time.Time, len(due))
	var batched []int // the mutex locks, for the driver's Batcher.RefreshAll
	l.mu.Lock()
	for i, h := range due {
		locks[i], ttls[i], deadlines[i] = h.grant.Lock, h.ttl, h.deadline
		if l.batch != nil && h.mode == backend.Exclusive {
			batched = append(batched, i)
		}
	}
	l.mu.Unlock()
	if len(batched) < 2 {
		batched = nil
	}
	sent := time.Now()
	stop := l.watchUnanswered(due, ttls, sent)
	defer stop()
	record := func(ctx context.Context, i int, err error) {
		l.renewal(ctx, due[i], sent, err)
		l.renewed(due[i], sent, ttls[i], err)
	}
	var wg sync.WaitGroup
	if batched != nil {
		wg.Go(func() {
			bl, bt := make([]backend.Lock, len(batched)), make([]time.Duration, len(batched))
			latest := deadlines[batched[0]]
			for j, i := range batched {
				bl[j], bt[j] = locks[i], ttls[i]
				if deadlines[i].After(latest) {
					latest = deadlines[i]
				}
			}
			ctx, cancel := context.WithDeadline(l.closeCtx, latest)
			defer cancel()
			for j, err := range l.batch.RefreshAll(ctx, bl, bt) {
				record(ctx, batched[j], err)
			}
		})
	}
	sem := make(chan struct{}, maxParallelRefresh)
	for i := range locks {
		if batched != nil && due[i].mode == backend.Exclusive {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithDeadline(l.closeCtx, deadlines[i])
			defer cancel()
			record(ctx, i, locks[i].Refresh(ctx, ttls[i]))
		})
	}
	wg.Wait()
}

// watchUnanswered puts each of due (whose renewal, sent at sent, is in
// flight) in doubt once that renewal has gone unanswered for a sixth of its
// TTL, as State reports it, so that EventInDoubt comes when State changes
// and not only when the renewal fails, perhaps at the deadline. stop ends
// the watch.
func (l *Locker) watchUnanswered(due []*hold, ttls []time.Duration, sent time.Time) (stop func()) {
	first := unansweredAfter(slices.Min(ttls))
	var t *time.Timer
	stopped := false
	check := func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if stopped {
			return
		}
		var next time.Duration
		for _, h := range due {
			if h.state != holdHeld || !h.renewing || h.doubt.cause != nil {
				continue
			}
			if wait := unansweredAfter(h.ttl) - time.Since(sent); wait > 0 {
				if next == 0 || wait < next {
					next = wait
				}
				continue
			}
			l.failedLocked(h, fmt.Errorf("renewal unanswered for %v: %w", time.Since(sent).Round(time.Millisecond), ErrUnavailable))
		}
		if next > 0 {
			t.Reset(next)
		}
	}
	l.mu.Lock()
	t = time.AfterFunc(first, check)
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		stopped = true
		l.mu.Unlock()
		t.Stop()
	}
}

// renewed records one renewal's outcome, sent at sent for ttl: the hold is
// extended, lost (the store said the lock is gone), or in doubt and
// checked again soon. An answer that comes after the hold's validity ran
// out changes nothing: the hold is lost (if the watchdog has not ended it
// yet, it ends now), whatever the store said.
func (l *Locker) renewed(h *hold, sent time.Time, ttl time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h.renewing = false
	if h.state != holdHeld {
		return
	}
	switch {
	case !time.Now().Before(h.deadline):
		l.loseLocked(h, h.doubt.ranOut("renewed"))
	case err == nil:
		l.extendedLocked(h, sent, ttl)
	case errors.Is(err, ErrNotHeld):
		l.loseLocked(h, err)
	default:
		if h.doubt.cause != nil {
			l.logHold(slog.LevelDebug, "distlock: renewal failed again", h, "cause", err)
		}
		l.failedLocked(h, err) // in doubt now, if it was not
		if h.autoRenew || h.doubt.checking {
			h.nextRenew = l.recheckAt(h, sent)
		}
		l.wd.reschedule(h)
	}
}

// unansweredAfter is how long a renewal may go unanswered before the lease
// is reported in doubt: a store that does not answer (a partition, a paused
// server) keeps a renewal in flight until the lease's validity runs out.
func unansweredAfter(ttl time.Duration) time.Duration { return ttl / 6 }
