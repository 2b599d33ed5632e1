package zkbench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/bench/internal/lockbench"
)

// TestInterleaved measures uncontended acquire+release of both libraries
// and of the bare request sequence (create, list children, delete) in
// short interleaved batches, which load from other processes hits alike:
// steadier than whole benchmark rounds on a busy machine
// (go test -v -run TestInterleaved ./zk/).
func TestInterleaved(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	const batches, per = 30, 20
	conn, err := newConn()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	acl := zk.WorldACL(zk.PermAll)
	parent := "/bench/bare-" + lockbench.UniqueKey("interleaved")
	for _, p := range []string{"/bench", parent} {
		if _, err := conn.Create(p, nil, 0, acl); err != nil && err != zk.ErrNodeExists {
			t.Fatal(err)
		}
	}
	bare := func(context.Context, string) (func(context.Context) error, error) {
		p, err := conn.Create(parent+"/_c_0123456789abcdef0123456789abcdef-lock-", nil, zk.FlagEphemeralSequential, acl)
		if err != nil {
			return nil, err
		}
		if _, _, err := conn.Children(parent); err != nil {
			return nil, err
		}
		return func(context.Context) error { return conn.Delete(p, -1) }, nil
	}
	type subject struct {
		name    string
		acquire func(context.Context, string) (func(context.Context) error, error)
	}
	subjects := []subject{{"bare create+children+delete", bare}}
	for _, lib := range libraries {
		x, err := lib.Make()
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		subjects = append(subjects, subject{lib.Name, x.Acquire})
	}
	ctx := context.Background()
	key := lockbench.UniqueKey("interleaved")
	means := make([][]time.Duration, len(subjects))
	for b := range batches {
		for i := range subjects {
			s := subjects[(i+b)%len(subjects)]
			start := time.Now()
			for range per {
				rel, err := s.acquire(ctx, key)
				if err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				if err := rel(ctx); err != nil {
					t.Fatalf("%s: release: %v", s.name, err)
				}
			}
			j := (i + b) % len(subjects)
			means[j] = append(means[j], time.Since(start)/per)
		}
	}
	var out string
	ref := lockbench.Median(means[len(subjects)-1]) // zk.Lock
	for i, s := range subjects {
		m := lockbench.Median(means[i])
		out += fmt.Sprintf("  %-28s %9v per acquire+release (median of %d batches of %d)   / zk.Lock = %.2f\n", s.name, m, batches, per, float64(m)/float64(ref))
	}
	fmt.Fprint(os.Stdout, "interleaved uncontended acquire+release:\n"+out)
}
