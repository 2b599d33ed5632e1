package redisbench

import (
	"testing"

	"github.com/distlock/distlock/bench/internal/lockbench"
	"github.com/distlock/distlock/sandbox"
)

// addr is the sandbox Redis server every scenario uses.
var addr string

func TestMain(m *testing.M) { lockbench.Main(m, sandbox.Redis, &addr) }
