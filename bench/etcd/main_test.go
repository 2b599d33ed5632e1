// Package etcdbench compares distlock's etcd backend with etcd's own
// concurrency.Mutex on one sandbox etcd member, in one run
// (go test -v -run TestCompare ./etcd/).
package etcdbench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/distlock/distlock/sandbox"
)

// addr is the sandbox etcd member every scenario uses.
var addr string

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	g, err := sandbox.Start(ctx, sandbox.Spec{Kind: sandbox.Etcd})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdbench: no etcd server:", err)
		os.Exit(1)
	}
	addr = g.Addrs()[0]
	code := m.Run()
	if err := g.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "etcdbench:", err)
	}
	os.Exit(code)
}
