// Package zkbench compares distlock's ZooKeeper backend with go-zookeeper's
// own zk.Lock on one sandbox ZooKeeper server, in one run
// (go test -v -run TestCompare ./zk/).
package zkbench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/distlock/distlock/sandbox"
)

// addr is the sandbox ZooKeeper server every scenario uses.
var addr string

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	g, err := sandbox.Start(ctx, sandbox.Spec{Kind: sandbox.ZooKeeper})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "zkbench: no ZooKeeper server:", err)
		os.Exit(1)
	}
	addr = g.Addrs()[0]
	code := m.Run()
	if err := g.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "zkbench:", err)
	}
	os.Exit(code)
}
