package measure

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Rotate returns xs in round r's order: rotated left by r, so that over
// len(xs) rounds every element runs once in every position and none
// always runs first.
func Rotate[T any](xs []T, r int) []T {
	if len(xs) == 0 {
		return nil
	}
	k := r % len(xs)
	out := make([]T, 0, len(xs))
	return append(append(out, xs[k:]...), xs[:k]...)
}

// Rounds is one library's contended runs, in the order they ran.
type Rounds []Contention

// Rates returns each round's grants per second.
func (rs Rounds) Rates() []float64 {
	out := make([]float64, len(rs))
	for i := range rs {
		out[i] = rs[i].Rate()
	}
	return out
}

// Pooled returns every round's samples pooled (see [Contention.Merge]).
func (rs Rounds) Pooled() Contention {
	var c *Contention
	for _, r := range rs {
		c = c.Merge(r)
	}
	if c == nil {
		return Contention{}
	}
	return *c
}

// Best returns the round of the highest rate (the zero Contention when
// there was none).
func (rs Rounds) Best() Contention {
	var best Contention
	for i, r := range rs {
		if i == 0 || r.Rate() > best.Rate() {
			best = r
		}
	}
	return best
}

// ContendRounds runs [Contend] for every library in rounds whose order
// rotates (see [Rotate]), each run on a key of its own derived from
// run.Key, and returns each library's rounds by name. A failed run ends it
// with that error; overlaps (two holders at once) are reported as an error
// after all rounds ran, with the results.
func ContendRounds(ctx context.Context, libs []Library, rounds int, run Run) (map[string]Rounds, error) {
	out := map[string]Rounds{}
	index := map[string]int{}
	for i, lib := range libs {
		index[lib.Name] = i
	}
	var errs []error
	for r := range rounds {
		for _, lib := range Rotate(libs, r) {
			one := run
			one.Key = fmt.Sprintf("%s-r%d-l%d", run.Key, r, index[lib.Name])
			c, err := Contend(ctx, lib, one)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", lib.Name, err)
			}
			if c.Overlaps != 0 {
				errs = append(errs, fmt.Errorf("%s: two workers held the lock at once %d times", lib.Name, c.Overlaps))
			}
			out[lib.Name] = append(out[lib.Name], c)
		}
	}
	return out, errors.Join(errs...)
}

// UncontendedRounds times acquire + release of a free key for every
// library in short rounds whose order rotates (ops pairs per library and
// round, see [Pairs]), so that load from other processes hits all of
// them alike. Each library keeps one contender for all rounds. It returns
// each library's mean time per pair in each round, by name.
func UncontendedRounds(ctx context.Context, libs []Library, rounds, ops int, key string) (map[string][]time.Duration, error) {
	xs := map[string]Contender{}
	defer func() {
		for _, x := range xs {
			x.Close()
		}
	}()
	for _, lib := range libs {
		x, err := lib.Make()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lib.Name, err)
		}
		xs[lib.Name] = x
	}
	out := map[string][]time.Duration{}
	for r := range rounds {
		for _, lib := range Rotate(libs, r) {
			ds, err := Pairs(ctx, xs[lib.Name], key, ops, 0)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", lib.Name, err)
			}
			out[lib.Name] = append(out[lib.Name], mean(ds))
		}
	}
	return out, nil
}

// mean returns the mean of ds (0 when empty).
func mean(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(max(1, len(ds)))
}
