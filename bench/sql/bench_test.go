package sqlbench

import "testing"

// BenchmarkSelect1 is the bare round trip.
func BenchmarkSelect1(b *testing.B) { benchSelect1(b) }

// BenchmarkUncontended is one client taking and freeing one free key.
func BenchmarkUncontended(b *testing.B) {
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) { benchUncontended(b, c) })
	}
}
