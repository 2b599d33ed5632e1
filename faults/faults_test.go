//go:build linux

package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/memlock"
)

// Environment:
//
//	DISTLOCK_FAULTS_SEED      the schedule's seed (default: from the clock, printed)
//	DISTLOCK_FAULTS_DURATION  how long faults are injected per backend (default 10s)
//	DISTLOCK_FAULTS_CLIENTS   client processes per backend (default 4)
//	DISTLOCK_FAULTS_BACKENDS  comma-separated names to run (default: all)
//	DISTLOCK_FAULTS_RECOVERY  progress bound after the last heal (default 30s)
//	DISTLOCK_FAULTS_PROFILE   which clients: open (distlock.Open), user (a
//	                          store client made with its library's defaults,
//	                          passed to the package's New) or both (default:
//	                          the odd slots user, the even ones open)

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

func config(t *testing.T) runConfig {
	cfg := runConfig{
		seed:     uint64(time.Now().UnixNano() % 1_000_000_000),
		clients:  4,
		duration: envDuration(t, "DISTLOCK_FAULTS_DURATION", 10*time.Second),
		recovery: envDuration(t, "DISTLOCK_FAULTS_RECOVERY", 30*time.Second),
		profile:  profileBoth,
	}
	switch v := os.Getenv("DISTLOCK_FAULTS_PROFILE"); v {
	case "":
	case profileOpen, profileUser, profileBoth:
		cfg.profile = v
	default:
		t.Fatalf("DISTLOCK_FAULTS_PROFILE=%q: want open, user or both", v)
	}
	if v := os.Getenv("DISTLOCK_FAULTS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("DISTLOCK_FAULTS_SEED=%q: %v", v, err)
		}
		cfg.seed = s
	}
	if v := os.Getenv("DISTLOCK_FAULTS_CLIENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 16 {
			t.Fatalf("DISTLOCK_FAULTS_CLIENTS=%q: want 1 to 16", v)
		}
		cfg.clients = n
	}
	return cfg
}

// TestFaults runs every backend under a seeded random fault schedule and
// judges the history (see docs/testing.md).
func TestFaults(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("client process")
	}
	cfg := config(t)
	want := map[string]bool{}
	if v := os.Getenv("DISTLOCK_FAULTS_BACKENDS"); v != "" {
		for _, n := range strings.Split(v, ",") {
			want[strings.TrimSpace(n)] = true
		}
	}
	t.Logf("seed %d, %v of faults per backend, %d clients, profile %s", cfg.seed, cfg.duration, cfg.clients, cfg.profile)
	var lines []string
	for _, tg := range targets() {
		if len(want) > 0 && !want[tg.name] {
			continue
		}
		t.Run(tg.name, func(t *testing.T) {
			if cfg.profile == profileUser && userStore(tg) == "" {
				t.Skip("no user-made client for this backend (DISTLOCK_FAULTS_PROFILE=user)")
			}
			o := execute(t, tg, cfg)
			line := fmt.Sprintf("%-14s %s | faults: %s", tg.name, o.res.Summary(), o.counted())
			for _, p := range o.byProfile {
				line += "\n    " + p.String()
			}
			lines = append(lines, line)
			skipped := strings.Join(o.skipped, ", ")
			if skipped == "" {
				skipped = "none"
			}
			t.Logf("%s\nskipped fault kinds: %s\nschedule (seed %d):\n%s%s", line, skipped, o.seed, o.schedule(), o.report)
			if !o.res.OK() {
				t.Errorf("%d violation(s); reproduce with: DISTLOCK_FAULTS_SEED=%d DISTLOCK_FAULTS_BACKENDS=%s DISTLOCK_FAULTS_PROFILE=%s FAULTS_DURATION=%v make faults",
					len(o.res.Violations), o.seed, tg.name, cfg.profile, cfg.duration)
			}
		})
	}
	t.Logf("summary (seed %d, %v per backend):\n%s", cfg.seed, cfg.duration, strings.Join(lines, "\n"))
}

// The checker must be able to fail: against memlock wrapped so that its
// grants ignore the holder (overlapping holds), and with a register that
// also accepts stale tokens (lost updates, tokens going backwards, a
// history that is not linearizable); against memlock whose semaphore and
// read-write lock grant over their holders (permits over the limit, a
// writer with readers or writers), and whose grants of them carry bad
// tokens (repeated permit tokens, write tokens going down, reads with
// token 0 after writes).
func TestCheckerCatchesBrokenLock(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("client process")
	}
	cfg := config(t)
	cfg.duration, cfg.recovery = 3*time.Second, 10*time.Second
	for _, c := range []struct {
		name        string
		acceptStale bool
		want        []string
	}{
		{"grants-ignore-holder", false, []string{"overlap"}},
		{"register-accepts-stale", true, []string{"overlap", "lost-update", "token-order", "linearizability"}},
		{primsIgnoreHolders, false, []string{"sem-limit", "rw-exclusion"}},
		{primsBadTokens, false, []string{"sem-token", "rw-write-token", "rw-read-token"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			wrap := func(d backend.Driver) backend.Driver { return &grantAlways{Driver: d} }
			if strings.HasPrefix(c.name, "primitives-") {
				wrap = func(d backend.Driver) backend.Driver { return &brokenPrims{Driver: d.(*memlock.Driver), bug: c.name} }
			}
			tg := target{name: c.name, ttl: time.Second, kinds: []string{fKill, fPause}, wrap: wrap, acceptStale: c.acceptStale}
			o := execute(t, tg, cfg)
			t.Logf("%s\n%s", o.res.Summary(), firstLines(o.report, 30))
			got := map[string]bool{}
			for _, v := range o.res.Violations {
				got[v.Kind] = true
			}
			for _, k := range c.want {
				if !got[k] {
					t.Errorf("the checker reported no %s violation against a broken lock", k)
				}
			}
		})
	}
}

func firstLines(s string, n int) string {
	ls := strings.SplitN(s, "\n", n+1)
	if len(ls) > n {
		ls = append(ls[:n], "...")
	}
	return strings.Join(ls, "\n")
}

// grantAlways grants even when another owner holds the key, with tokens
// that keep growing (so only the hold check, or a register that ignores
// tokens, can tell).
type grantAlways struct{ backend.Driver }

var brokenTokens atomic.Uint64

func init() { brokenTokens.Store(1 << 40) }

func (d *grantAlways) Subscribe(ctx context.Context, key string, kind backend.Kind) (<-chan struct{}, func(), error) {
	return d.Driver.(backend.Notifier).Subscribe(ctx, key, kind)
}
func (d *grantAlways) Withdraw(ctx context.Context, req backend.Request) error {
	return d.Driver.(backend.Notifier).Withdraw(ctx, req)
}

func (d *grantAlways) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	g, err := d.Driver.TryAcquire(ctx, req)
	if errors.Is(err, backend.ErrNotAcquired) {
		return backend.Grant{Lock: nopLock{}, Token: brokenTokens.Add(1), TTL: req.TTL, ValidFrom: time.Now()}, nil
	}
	return g, err
}

type nopLock struct{}

func (nopLock) Refresh(context.Context, time.Duration) error { return nil }
func (nopLock) Release(context.Context) error                { return nil }

// The bugs of brokenPrims.
const (
	primsIgnoreHolders = "primitives-grant-over-holders" // a refused permit or write is granted anyway
	primsBadTokens     = "primitives-bad-tokens"         // permits all token 7, write tokens go down, reads token 0
)

// brokenPrims is memlock (the lock intact) with a broken semaphore and
// read-write lock.
type brokenPrims struct {
	*memlock.Driver
	bug string
}

var downTokens atomic.Uint64

func (d *brokenPrims) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	g, err := d.Driver.TryAcquire(ctx, req)
	switch {
	case req.Kind == backend.Permits && d.bug == primsIgnoreHolders && errors.Is(err, backend.ErrNotAcquired):
		return backend.Grant{Lock: nopLock{}, Token: brokenTokens.Add(1), TTL: req.TTL, ValidFrom: time.Now()}, nil
	case req.Kind == backend.Permits && d.bug == primsBadTokens && err == nil:
		g.Token = 7
	case req.Kind == backend.Write && d.bug == primsIgnoreHolders && errors.Is(err, backend.ErrNotAcquired):
		return backend.Grant{Lock: nopLock{}, Token: brokenTokens.Add(1), TTL: req.TTL, ValidFrom: time.Now()}, nil
	case req.Kind == backend.Write && d.bug == primsBadTokens && err == nil:
		g.Token = 1<<40 - downTokens.Add(1)
	case req.Kind == backend.Read && d.bug == primsBadTokens && err == nil:
		g.Token = 0
	}
	return g, err
}
