package measure

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 ≤ p ≤ 100) of xs by the
// nearest-rank definition: with the n samples sorted in ascending order,
// it is the sample at 1-based rank ⌈p·n/100⌉, and the smallest sample
// when that rank is 0. So p = 100 is the maximum, p = 50 of an even count
// is the lower of the two middle samples, and every percentile is a value
// that was measured (no interpolation). An empty xs gives the zero value.
// xs is not modified.
func Percentile[T cmp.Ordered](xs []T, p float64) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return PercentileSorted(s, p)
}

// PercentileSorted is [Percentile] of samples already sorted in ascending
// order, without copying them.
func PercentileSorted[T cmp.Ordered](sorted []T, p float64) T {
	if len(sorted) == 0 {
		var zero T
		return zero
	}
	return sorted[rankIndex(len(sorted), p)]
}

// rankIndex returns the 0-based index of the nearest-rank p-th percentile
// of n sorted samples. p·n is computed before the division so that whole
// percentiles of sample counts below 2^40 land on exact ranks.
func rankIndex(n int, p float64) int {
	rank := int(math.Ceil(p * float64(n) / 100))
	return min(max(rank, 1), n) - 1
}

// Median is [Percentile] 50: of an even count, the lower middle sample.
func Median[T cmp.Ordered](xs []T) T { return Percentile(xs, 50) }

// Summary is what the reports print of a distribution of durations.
type Summary struct {
	N   int           // samples
	P50 time.Duration // Percentile 50
	P99 time.Duration // Percentile 99
	Max time.Duration // Percentile 100
}

// Summarize returns the summary of ds (all zero when ds is empty).
func Summarize(ds []time.Duration) Summary {
	s := slices.Clone(ds)
	slices.Sort(s)
	return Summary{
		N:   len(s),
		P50: PercentileSorted(s, 50),
		P99: PercentileSorted(s, 99),
		Max: PercentileSorted(s, 100),
	}
}

// Round returns s with its durations rounded to multiples of m, for
// printing.
func (s Summary) Round(m time.Duration) Summary {
	s.P50, s.P99, s.Max = s.P50.Round(m), s.P99.Round(m), s.Max.Round(m)
	return s
}
