// Package backoff is the library's one doubling retry delay, for the
// portable layer and the drivers (which may import it: it is internal to
// the module they live in).
package backoff

import (
	"math/rand/v2"
	"time"
)

// Backoff is a jittered doubling delay: the first Next gives about lo,
// each later one about twice the one before, at most hi. Every delay is
// drawn from the upper half of its step (see Jitter), so that many
// clients retrying after the same failure do not retry in step. The zero
// Backoff is ready to use; it is not safe for concurrent use.
type Backoff struct{ step time.Duration }

// Next returns the next delay. lo and hi (lo <= hi, lo > 0) are given on
// each call, so one Backoff may be capped differently for different
// causes; a step above a smaller hi is cut down to it.
func (b *Backoff) Next(lo, hi time.Duration) time.Duration {
	if b.step < lo {
		b.step = lo
	} else {
		b.step = min(b.step*2, hi)
	}
	return Jitter(b.step)
}

// Reset starts the doubling over: the next delay is about lo again.
func (b *Backoff) Reset() { b.step = 0 }

// Jitter returns a delay drawn uniformly from [d/2, d].
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d/2 + randN(d/2+1)
}

// randN returns a value in [0, n); tests replace it.
var randN = rand.N[time.Duration]
