package etcdlock

import (
	"time"

	"github.com/distlock/distlock/backend"
)

// Exported for tests.
var (
	NormalizePrefix = normalizePrefix
	EscapeKey       = escapeKey
	LockRange       = lockRange
)

// Parsed is what a URL configures, for tests.
type Parsed struct {
	Endpoints []string
	Prefix    string
	TTL       time.Duration
	User      string
	TLS       bool
	Dial      time.Duration
}

// ParseForTest parses raw as the opener would, without dialing.
func ParseForTest(raw string) (Parsed, error) {
	u, err := backend.ParseURL(raw)
	if err != nil {
		return Parsed{}, err
	}
	c, err := parseURL(u)
	if err != nil {
		return Parsed{}, err
	}
	return Parsed{
		Endpoints: c.client.Endpoints, Prefix: c.options.Prefix, TTL: c.options.TTL,
		User: c.client.Username, TLS: c.client.TLS != nil, Dial: c.client.DialTimeout,
	}, nil
}

// SetNear sets how many keys may be ahead of d's waiters for them to watch
// the whole queue (1 or 2).
func SetNear(d *Driver, n int) { d.near = min(max(n, 1), maxNear) }

// HeldCount is how many locks d tracks as held.
func HeldCount(d *Driver) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.held)
}
