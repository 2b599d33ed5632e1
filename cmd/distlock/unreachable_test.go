package main

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// closedPort returns a loopback port nothing listens on (one just freed).
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	return strconv.Itoa(port)
}

// TestUnreachableExit69: against a closed port, run (--no-wait, --wait,
// waiting indefinitely) and status exit 69 within --connect-timeout, for
// every store (issue 12, item 9: etcd hung forever, status exited 1).
func TestUnreachableExit69(t *testing.T) {
	for _, url := range []string{
		"redis://127.0.0.1:PORT/0",
		"mysql://root@127.0.0.1:PORT/db",
		"zk://127.0.0.1:PORT/locks",
		"etcd://127.0.0.1:PORT/locks",
	} {
		url = strings.Replace(url, "PORT", closedPort(t), 1)
		for _, args := range [][]string{
			{"run", "--url", url, "--key", "k", "--no-wait", "--connect-timeout", "2s", "--", "true"},
			{"run", "--url", url, "--key", "k", "--wait", "5s", "--connect-timeout", "2s", "--", "true"},
			{"run", "--url", url, "--key", "k", "--connect-timeout", "2s", "--", "true"},
			{"status", "--url", url, "--key", "k", "--connect-timeout", "2s"},
		} {
			t0 := time.Now()
			out, code := runCLI(t, nil, args...)
			took := time.Since(t0)
			if code != ExitUnavailable {
				t.Errorf("distlock %q: exit %d after %v, want %d\n%s", args, code, took, ExitUnavailable, out)
			}
			if took > 10*time.Second {
				t.Errorf("distlock %q took %v, with --connect-timeout 2s", args, took)
			}
		}
	}
}

// TestOpenUnreachableEveryBackend: distlock.Open confirms the store is reachable
// within its ctx, for every backend: against a closed port it fails within
// ctx (here well inside the URLs' own dial timeouts) with an error matching
// ErrUnavailable (issue 12, item 9).
func TestOpenUnreachableEveryBackend(t *testing.T) {
	for _, url := range []string{
		"redis://127.0.0.1:%s/0",
		"redis://127.0.0.1:%s,127.0.0.1:%s?mode=cluster",
		"redis://127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s?mode=redlock",
		"mysql://root@127.0.0.1:%s/db",
		"mysql://root@127.0.0.1:%s/db?create_table=false",
		"zk://127.0.0.1:%s/locks",
		"etcd://127.0.0.1:%s/locks",
	} {
		for range 3 {
			url = strings.Replace(url, "%s", closedPort(t), 1)
		}
		t.Run(url, func(t *testing.T) {
			const bound = 2 * time.Second
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			t0 := time.Now()
			l, err := distlock.Open(ctx, url)
			took := time.Since(t0)
			if err == nil {
				_ = l.Close()
				t.Fatalf("Open of a closed port succeeded")
			}
			if !errors.Is(err, distlock.ErrUnavailable) {
				t.Errorf("Open of a closed port = %v, want an error matching ErrUnavailable", err)
			}
			if took > bound+time.Second {
				t.Errorf("Open took %v, beyond its ctx's %v", took, bound)
			}
		})
	}
}
