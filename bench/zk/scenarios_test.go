package zkbench

import (
	"testing"

	"github.com/distlock/distlock/bench/internal/lockbench"
)

// benchExists measures a bare Exists round trip: the floor of any lock
// operation.
func benchExists(b *testing.B) {
	conn, err := newConn()
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	for b.Loop() {
		if _, _, err := conn.Exists("/"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExists(b *testing.B) { benchExists(b) }

func BenchmarkUncontended(b *testing.B) {
	for _, lib := range libraries {
		b.Run(lib.Name, func(b *testing.B) { lockbench.Uncontended(b, lib) })
	}
}
