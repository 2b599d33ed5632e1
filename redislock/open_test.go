package redislock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
)

func parse(t *testing.T, raw string) (redisproto.Config, error) {
	t.Helper()
	u, err := backend.ParseURL(raw)
	if err != nil {
		t.Fatalf("ParseURL(%q): %v", raw, err)
	}
	return redisproto.ParseConfig(u)
}

func TestParseConfig(t *testing.T) {
	cfg, err := parse(t, "rediss://app:s3cret@h1:7000/2?read_timeout=500ms&wait_replicas=1&wait_timeout=200ms&prefix=locks")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Mode != redisproto.ModeSingle || cfg.DB != 2 || cfg.Username != "app" || cfg.Password != "s3cret" ||
		cfg.Read != 500*time.Millisecond || cfg.WaitReplicas != 1 || cfg.Prefix != "locks" ||
		cfg.TLS == nil || cfg.TLS.ServerName != "h1" || cfg.Addrs[0] != "h1:7000" {
		t.Errorf("unexpected config %+v", cfg)
	}
	cfg, err = parse(t, "redis://h1,h2,h3?mode=redlock")
	if err != nil || cfg.Mode != redisproto.ModeRedlock || len(cfg.Addrs) != 3 || cfg.Addrs[2] != "h3:6379" {
		t.Errorf("redlock: %+v, %v", cfg, err)
	}
	cfg, err = parse(t, "redis://h1,h2,h3")
	if err != nil || cfg.Mode != redisproto.ModeCluster {
		t.Errorf("several hosts default to cluster: %+v, %v", cfg.Mode, err)
	}
	for raw, want := range map[string]WaitMode{"redis://h1": WaitDefault, "redis://h1?wait=queue": WaitQueue, "redis://h1?wait=notify": WaitNotify} {
		if cfg, err := parse(t, raw); err != nil || cfg.Wait != want {
			t.Errorf("%s: wait mode %v, %v; want %v", raw, cfg.Wait, err, want)
		}
	}
}

// TestWaitModeDefaults checks which wait mode each constructor settles on.
func TestWaitModeDefaults(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, tc := range []struct {
		opts *Options
		want WaitMode
		caps backend.WaitKind
	}{
		{nil, WaitQueue, backend.WaitQueue},
		{&Options{Wait: WaitNotify}, WaitNotify, backend.WaitNotify},
		{&Options{WaitReplicas: 1}, WaitNotify, backend.WaitNotify},
	} {
		d, err := New(c, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if d.opts.Wait != tc.want || d.caps.Wait != tc.caps || d.caps.Fair != (tc.want == WaitQueue) {
			t.Errorf("New(%+v): mode %v, caps %v fair %v", tc.opts, d.opts.Wait, d.caps.Wait, d.caps.Fair)
		}
		d.Close()
	}
	if _, err := New(c, &Options{Wait: WaitQueue, WaitReplicas: 1}); err == nil || !strings.Contains(err.Error(), "cannot be combined") {
		t.Errorf("queue + WaitReplicas: %v", err)
	}
	if _, err := New(c, &Options{Wait: 7}); err == nil || !strings.Contains(err.Error(), "unknown Wait mode") {
		t.Errorf("bad mode: %v", err)
	}
}

// New defaults an empty Options.Prefix and refuses one that would break the
// hash tag, with a redislock: error matching ErrInvalidConfig.
func TestOptionsPrefix(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	d, err := New(c, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if d.opts.Prefix != DefaultPrefix {
		t.Errorf("New with no prefix: %q, want %q", d.opts.Prefix, DefaultPrefix)
	}
	_ = d.Close()
	_, err = New(c, &Options{Prefix: "a{b"})
	if !errors.Is(err, backend.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "redislock: ") || !strings.Contains(err.Error(), "hash tag") {
		t.Errorf("New with the prefix a{b: %v, want a redislock: error matching ErrInvalidConfig that names the hash tag", err)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://h1?colour=blue":                     "unknown parameter(s): colour",
		"redis://h1/x":                               `path "/x"`,
		"redis://h1,h2/1":                            "only database 0",
		"redis://h1,h2?mode=single":                  "mode=single takes one host",
		"redis://h1?mode=sentinel":                   "mode=",
		"redis://h1,h2?wait_replicas=1":              "not supported with mode=cluster",
		"redis://h1?wait_replicas=1&wait_timeout=5s": "must be shorter than read_timeout",
		"redis://h1?tls_server_name=x":               "rediss://",
		"redis://h1?prefix=a{b":                      "hash tag",
		"redis://h1?dial_timeout=-1s":                "dial_timeout",
		"redis://h1?mode=redlock&wait_replicas=1":    "not supported with mode=redlock",
		"redis://h1?wait=queue&wait_replicas=1":      "cannot be combined",
		"redis://h1?wait=fifo":                       "parameter wait=\"fifo\": want one of",
	} {
		u, err := backend.ParseURL(raw)
		if err != nil {
			t.Fatalf("ParseURL(%q): %v", raw, err)
		}
		d, err := openURL(context.Background(), u)
		if err == nil {
			err = u.Query.Err()
			_ = d.Close()
		}
		if err == nil || !errors.Is(err, backend.ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want ErrInvalidConfig mentioning %q", raw, err, want)
		}
	}
}

func TestPasswordNeverInErrors(t *testing.T) {
	_, err := parse(t, "redis://u:hunter2@h1?bogus=1")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %v", err)
	}
}

// TestURLClientsOneAttempt: clients opened from a URL make one attempt per
// command in single and Redlock modes (docs/redis.md); in Cluster mode the
// node clients do, and MaxRedirects covers MOVED/ASK (and, in go-redis,
// network errors: see docs/redis.md).
func TestURLClientsOneAttempt(t *testing.T) {
	for _, raw := range []string{"redis://h1/0", "redis://h1,h2,h3?mode=redlock"} {
		cfg, err := parse(t, raw)
		if err != nil {
			t.Fatal(err)
		}
		if o := cfg.Single(cfg.Addrs[0]); o.MaxRetries != -1 {
			t.Errorf("%s: MaxRetries = %d, want -1 (one attempt)", raw, o.MaxRetries)
		}
	}
	cfg, err := parse(t, "redis://h1,h2?mode=cluster")
	if err != nil {
		t.Fatal(err)
	}
	if o := cfg.Cluster(); o.MaxRetries != -1 {
		t.Errorf("cluster: MaxRetries = %d, want -1 (one attempt per node call)", o.MaxRetries)
	}
}

// An acquisition that could not even connect took nothing: its error says
// the store is unavailable, without a cleanup that cannot have had
// anything to remove (and failed the same way).
func TestUnreachableTryAcquireNoCleanup(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer c.Close()
	d, err := New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = d.TryAcquire(ctx, backend.Request{Key: "k", Owner: "o", TTL: time.Second})
	if !errors.Is(err, backend.ErrUnavailable) || strings.Contains(err.Error(), "cleanup") {
		t.Errorf("TryAcquire on a closed port = %v, want ErrUnavailable with no cleanup", err)
	}
}

// openURL opens u through the registry, as distlock.Open does: the
// redis:// opener serves mode=redlock too in these tests, which import
// package redlock (redlock_test.go).
func openURL(ctx context.Context, u *backend.URL) (backend.Driver, error) {
	open, err := backend.Lookup(u.Scheme)
	if err != nil {
		return nil, err
	}
	return open(ctx, u)
}
