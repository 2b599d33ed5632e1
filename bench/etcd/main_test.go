// Package etcdbench compares distlock's etcd backend with etcd's own
// concurrency.Mutex on one sandbox etcd member, in one run
// (go test -v -run TestCompare ./etcd/).
package etcdbench

import (
	"testing"

	"github.com/distlock/distlock/bench/internal/lockbench"
	"github.com/distlock/distlock/sandbox"
)

// addr is the sandbox etcd member every scenario uses.
var addr string

func TestMain(m *testing.M) { lockbench.Main(m, sandbox.Etcd, &addr) }
