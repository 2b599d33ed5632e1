package redlock

import (
	"context"
	"time"

	"github.com/distlock/distlock/internal/backoff"
	"github.com/distlock/distlock/internal/redisproto"
)

// splitWait bounds how long, from its first request, an attempt holding
// the first node of a split vote asks the refusing nodes again: the other
// attempts of the split free them within a round trip or two; a lock held
// by a majority that lacks that node keeps refusing, and the attempt then
// gives up. A quarter of the TTL at most, so the grant keeps most of its
// validity, and 200 ms.
func splitWait(ttl time.Duration) time.Duration { return min(ttl/4, 200*time.Millisecond) }

// votes counts the nodes' answers to one attempt.
type votes struct {
	held, refused, failed int
	retry                 time.Duration // the shortest time a refusing node's lock has left
}

// countVotes counts res and errs, one entry per node.
func countVotes(res []redisproto.AcquireResult, errs []error) votes {
	var v votes
	for i := range res {
		switch {
		case errs[i] != nil:
			v.failed++
		case res[i].Held:
			v.held++
		default:
			v.refused++
			if v.retry == 0 || res[i].PTTL < v.retry {
				v.retry = res[i].PTTL
			}
		}
	}
	return v
}

// split reports whether the nodes that answered could still make a
// quorum that the grants so far do not: a split vote, or a lock about to
// be freed.
func (v votes) split(quorum int) bool { return v.held < quorum && v.held+v.refused >= quorum }

// askAgain asks the nodes that refused the attempt again, with a jittered
// pause doubling from 100 µs to 5 ms, while mine() holds and the vote is
// split, for at most splitWait(ttl) since first or until ctx ends; ask
// sends the attempt to the given nodes and records their answers in res
// and errs. It returns the final count.
func (r *Driver) askAgain(ctx context.Context, ttl time.Duration, first time.Time, res []redisproto.AcquireResult, errs []error, ask func(only []int), mine func() bool) votes {
	v := countVotes(res, errs)
	budget := splitWait(ttl)
	const pauseMin, pauseMax = 100 * time.Microsecond, 5 * time.Millisecond
	var bo backoff.Backoff
	pause := bo.Next(pauseMin, pauseMax)
	for v.split(r.quorum) && mine() && time.Since(first)+pause < budget && ctx.Err() == nil {
		if sleepCtx(ctx, pause) != nil {
			break
		}
		pause = bo.Next(pauseMin, pauseMax)
		var again []int
		for i := range res {
			if errs[i] == nil && !res[i].Held {
				again = append(again, i)
			}
		}
		ask(again)
		v = countVotes(res, errs)
	}
	return v
}
