package etcdbench

import (
	"context"
	"testing"

	"github.com/distlock/distlock/bench/internal/lockbench"
)

// benchPut measures a bare Put round trip.
func benchPut(b *testing.B) {
	cli, err := newClient("put")
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	key := lockbench.UniqueKey("put")
	for b.Loop() {
		if _, err := cli.Put(ctx, key, "x"); err != nil {
			b.Fatal(err)
		}
	}
	_, _ = cli.Delete(ctx, key)
}

func BenchmarkPut(b *testing.B) { benchPut(b) }

func BenchmarkUncontended(b *testing.B) {
	for _, lib := range libraries {
		b.Run(lib.Name, func(b *testing.B) { lockbench.Uncontended(b, lib) })
	}
}
