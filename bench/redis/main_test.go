package redisbench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/distlock/distlock/sandbox"
)

// addr is the sandbox Redis server every scenario uses.
var addr string

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	g, err := sandbox.Start(ctx, sandbox.Spec{Kind: sandbox.Redis})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "redisbench: no Redis server:", err)
		os.Exit(1)
	}
	addr = g.Addrs()[0]
	code := m.Run()
	if err := g.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "redisbench:", err)
	}
	os.Exit(code)
}
