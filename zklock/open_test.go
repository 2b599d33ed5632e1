package zklock

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

func parse(t *testing.T, raw string) (urlConfig, error) {
	t.Helper()
	u, err := backend.ParseURL(raw)
	if err != nil {
		return urlConfig{}, err
	}
	return parseURL(u)
}

func TestParseURL(t *testing.T) {
	c, err := parse(t, "zk://h1,h2:2182,[::1]/app/locks?session_timeout=3s&connect_timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"h1:2181", "h2:2182", "[::1]:2181"}; strings.Join(c.hosts, " ") != strings.Join(want, " ") {
		t.Errorf("hosts = %v, want %v", c.hosts, want)
	}
	if c.opts.Base != "/app/locks" || c.dial.timeout != 3*time.Second || c.dial.connectTimeout != time.Second {
		t.Errorf("config = %+v", c)
	}
	if c.opts.ACL[0].Scheme != "world" {
		t.Errorf("default ACL without credentials = %v, want world:anyone", c.opts.ACL)
	}

	for raw, want := range map[string]time.Duration{
		"zk://h1":                           defaultSessionTimeout,
		"zk://h1?ttl=4s":                    4 * time.Second,
		"zk://h1?ttl=4s&session_timeout=6s": 6 * time.Second,
		"zk://h1?session_timeout=5s":        5 * time.Second,
	} {
		if c, err := parse(t, raw); err != nil || c.dial.timeout != want {
			t.Errorf("%s: session timeout %v (%v), want %v", raw, c.dial.timeout, err, want)
		}
	}

	c, err = parse(t, "zk://alice:s3cret@h1")
	if err != nil {
		t.Fatal(err)
	}
	if c.opts.Base != defaultBase || c.dial.user != "alice" || c.dial.password != "s3cret" || c.opts.ACL[0].Scheme != "auth" {
		t.Errorf("with credentials: %+v", c)
	}
	c, err = parse(t, "zk://alice:s3cret@h1?acl=creator-read")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.opts.ACL) != 2 || c.opts.ACL[1].Perms != zk.PermRead {
		t.Errorf("acl=creator-read: %v", c.opts.ACL)
	}
}

func TestParseURLErrors(t *testing.T) {
	cases := map[string]string{
		"zk:///locks":                           "no host",
		"zk://h1/a/../b":                        "relative path segment",
		"zk://h1/zookeeper":                     "reserved",
		"zk://h1?session_timeout=soon":          "session_timeout",
		"zk://h1?session_timeout=1ms":           "session_timeout",
		"zk://h1?session_timeout=25h":           "want from 100ms to 24h",
		"zk://h1?session_timeout=2562047h":      "want from 100ms to 24h",
		"zk://h1?ttl=2562047h":                  "want from 100ms to 24h",
		"zk://h1?connect_timeout=-1s":           "connect_timeout",
		"zk://h1?acl=creator":                   "needs credentials",
		"zk://h1?acl=everyone":                  "want one of open, creator, creator-read",
		"zk://h1?chroot=/x":                     "unknown parameter(s): chroot",
		"zk://bob@h1":                           "user:password",
		"zk://h1:99999":                         "port",
		"zk://h1?session_timeout=1s&bogus=1&x=": "unknown parameter(s): bogus, x",
	}
	for raw, want := range cases {
		_, err := parse(t, raw)
		if err == nil {
			t.Errorf("%s: no error, want one mentioning %q", raw, want)
			continue
		}
		if !errors.Is(err, backend.ErrInvalidConfig) {
			t.Errorf("%s: %v does not match ErrInvalidConfig", raw, err)
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %q does not mention %q", raw, err, want)
		}
	}
}

func TestParseURLHidesPassword(t *testing.T) {
	_, err := parse(t, "zk://alice:topsecret@h1?acl=nope")
	if err == nil || strings.Contains(err.Error(), "topsecret") {
		t.Errorf("error %v: want one without the password", err)
	}
}

func TestNewNeedsSessionTimeout(t *testing.T) {
	if _, err := New(nil, &Options{SessionTimeout: time.Second}); !errors.Is(err, backend.ErrInvalidConfig) {
		t.Errorf("New(nil) = %v, want ErrInvalidConfig", err)
	}
}

// recorder is a slog.Handler counting records.
type recorder struct{ n atomic.Int64 }

func (r *recorder) Enabled(context.Context, slog.Level) bool  { return true }
func (r *recorder) Handle(context.Context, slog.Record) error { r.n.Add(1); return nil }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler        { return r }
func (r *recorder) WithGroup(string) slog.Handler             { return r }

// The driver never logs through slog's default logger: go-zookeeper's
// messages go to the Locker's logger (backend.Logging), or nowhere.
func TestNoDefaultLogger(t *testing.T) {
	rec := &recorder{}
	prev := slog.Default()
	slog.SetDefault(slog.New(rec))
	defer slog.SetDefault(prev)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if l, err := distlock.Open(ctx, "zk://127.0.0.1:1/locks?session_timeout=2s&connect_timeout=1s"); err == nil {
		l.Close()
		t.Fatal("Open of a closed port succeeded")
	}
	if n := rec.n.Load(); n > 0 {
		t.Errorf("%d record(s) went to slog's default logger", n)
	}
}
