package compare

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/measure"
)

// A Target is one backend under test.
type Target struct {
	// Name labels the backend in reports, e.g. "redis".
	Name string
	// URL opens a client of the backend; its password is never printed.
	URL string
	// Crash, when not nil, kills a lock holder in a way this process can
	// observe (used for in-process backends). Without it, crash-recovery
	// runs a separate `distlock run` process and kills it with SIGKILL.
	Crash func(ctx context.Context, key string, ttl time.Duration) (killed time.Time, err error)
}

// Display returns the target's URL without its password.
func (t Target) Display() string {
	u, err := backend.ParseURL(t.URL)
	if err != nil {
		return "(invalid URL)"
	}
	return u.Redacted()
}

// urlWithTTL returns the URL with a ttl parameter (unless it has one), so
// that backends whose locks live as long as a session (etcd, ZooKeeper)
// size their session by the workload's TTL too.
func (t Target) urlWithTTL(ttl time.Duration) string {
	u, err := backend.ParseURL(t.URL)
	if err != nil || u.Query.Has("ttl") {
		return t.URL
	}
	sep := "?"
	if strings.Contains(t.URL, "?") {
		sep = "&"
	}
	return t.URL + sep + "ttl=" + ttl.String()
}

func (t Target) open(ctx context.Context, ttl time.Duration) (*distlock.Locker, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l, err := distlock.Open(ctx, t.urlWithTTL(ttl), distlock.WithDefaultTTL(ttl))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.Name, err)
	}
	return l, nil
}

// openN opens n independent Lockers; on error it closes those it opened.
func (t Target) openN(ctx context.Context, n int, ttl time.Duration) ([]*distlock.Locker, error) {
	ls := make([]*distlock.Locker, 0, n)
	for range n {
		l, err := t.open(ctx, ttl)
		if err != nil {
			closeAll(ls)
			return nil, err
		}
		ls = append(ls, l)
	}
	return ls, nil
}

func closeAll(ls []*distlock.Locker) {
	for _, l := range ls {
		_ = l.Close()
	}
}

// lockerContender is a Locker as the measurement core drives it.
type lockerContender struct{ l *distlock.Locker }

func (c lockerContender) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	le, err := c.l.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return le.Release, nil
}

func (c lockerContender) Close() { _ = c.l.Close() }

// library makes contenders of the target: each its own Locker, as separate
// processes would have.
func (t Target) library(ctx context.Context, ttl time.Duration) measure.Library {
	return measure.Library{Name: t.Name, Make: func() (measure.Contender, error) {
		l, err := t.open(ctx, ttl)
		if err != nil {
			return nil, err
		}
		return lockerContender{l}, nil
	}}
}
