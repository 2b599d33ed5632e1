package sqlbench

import (
	"testing"

	"github.com/distlock/distlock/bench/internal/lockbench"
)

// BenchmarkSelect1 is the bare round trip.
func BenchmarkSelect1(b *testing.B) { benchSelect1(b) }

// BenchmarkUncontended is one client taking and freeing one free key.
func BenchmarkUncontended(b *testing.B) {
	for _, c := range contenders {
		b.Run(c.Name, func(b *testing.B) { lockbench.Uncontended(b, c) })
	}
}
