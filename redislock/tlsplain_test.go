package redislock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sandbox"
)

// rediss:// to a server that speaks no TLS: the handshake never ends (the
// server waits for the end of a command line). Open gives up within
// dial_timeout and says "TLS handshake" (issue 32, item 6), rather than
// waiting out the ctx with a bare context deadline exceeded.
func TestTLSToPlainServer(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	u := "rediss://" + g.Node(0).Addr() + "?dial_timeout=500ms&tls_insecure_skip_verify=true"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	l, err := distlock.Open(ctx, u)
	took := time.Since(start)
	if err == nil {
		l.Close()
		t.Fatal("Open of rediss:// to a plain server succeeded")
	}
	t.Logf("after %v: %v", took.Round(time.Millisecond), err)
	if took > 2*time.Second {
		t.Errorf("Open took %v with dial_timeout=500ms", took.Round(time.Millisecond))
	}
	if !strings.Contains(err.Error(), "TLS handshake") {
		t.Errorf("error %q does not say TLS handshake", err)
	}
	if !errors.Is(err, distlock.ErrUnavailable) {
		t.Errorf("%v: want ErrUnavailable", err)
	}
}
