// Package zkbench compares distlock's ZooKeeper backend with go-zookeeper's
// own zk.Lock on one sandbox ZooKeeper server, in one run
// (go test -v -run TestCompare ./zk/).
package zkbench

import (
	"testing"

	"github.com/distlock/distlock/bench/internal/lockbench"
	"github.com/distlock/distlock/sandbox"
)

// addr is the sandbox ZooKeeper server every scenario uses.
var addr string

func TestMain(m *testing.M) { lockbench.Main(m, sandbox.ZooKeeper, &addr) }
