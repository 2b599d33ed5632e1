package etcdlock

import (
	"fmt"
	"testing"
)

// TestSemFollow: a waiter follows every key ahead of it when there are at
// most maxSemFollow, else the newest ones, as many as it takes for them to
// keep it out on their own.
func TestSemFollow(t *testing.T) {
	queue := func(n, permits, limit int) []semEntry {
		var q []semEntry
		for i := range n {
			q = append(q, semEntry{name: fmt.Sprint(i), permits: permits, limit: limit})
		}
		return q
	}
	for _, c := range []struct {
		name  string
		ahead []semEntry
		mine  semEntry
		from  int
	}{
		{"short queue: every key", queue(10, 1, 4), semEntry{permits: 1, limit: 4}, 0},
		{"long queue: the newest", queue(40, 1, 4), semEntry{permits: 1, limit: 4}, 40 - maxSemFollow},
		{"newest fit a large limit: more", queue(40, 1, 36), semEntry{permits: 1, limit: 36}, 40 - 36},
		{"none keeps it out: every key", queue(40, 1, 100), semEntry{permits: 1, limit: 100}, 0},
	} {
		q := semQueue{ahead: c.ahead, mine: c.mine}
		from := followFrom(q)
		if from != c.from {
			t.Errorf("%s: follows from %d, want %d", c.name, from, c.from)
		}
		if from > 0 && !keepsOut(c.ahead[from:], c.mine) {
			t.Errorf("%s: the followed keys do not keep it out", c.name)
		}
	}
}

// TestSemFits: holders are a prefix of the queue and each grant fits its
// asker's own limit (docs/primitives.md, "Why fair stores keep holders a
// prefix of the queue").
func TestSemFits(t *testing.T) {
	for _, c := range []struct {
		name  string
		ahead []semEntry
		mine  semEntry
		want  bool
	}{
		{"empty queue", nil, semEntry{permits: 2, limit: 2}, true},
		{"room left", []semEntry{{permits: 1, limit: 3}}, semEntry{permits: 2, limit: 3}, true},
		{"full", []semEntry{{permits: 2, limit: 3}}, semEntry{permits: 2, limit: 3}, false},
		{"a larger limit behind a waiter", []semEntry{{permits: 2, limit: 2}, {permits: 2, limit: 2}}, semEntry{permits: 1, limit: 5}, false},
		{"own limit counts", []semEntry{{permits: 2, limit: 5}}, semEntry{permits: 1, limit: 2}, false},
		{"unreadable key ahead", []semEntry{{permits: 1 << 21, limit: 1 << 20}}, semEntry{permits: 1, limit: 1 << 20}, false},
	} {
		if got := fits(c.ahead, c.mine); got != c.want {
			t.Errorf("%s: fits = %v, want %v", c.name, got, c.want)
		}
	}
}
