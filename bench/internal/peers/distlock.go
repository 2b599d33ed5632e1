package peers

import (
	"context"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/bench/internal/measure"
)

// distlockPeer is distlock as a program with a client of the store builds
// it: the driver's New over a client made like the peers' (the client
// library's defaults), one Locker per client. Its Crash is nil: the
// comparison kills a holder process of its own instead (compare.HolderMain).
func distlockPeer(about string, newDriver func(ctx context.Context, ttl time.Duration) (backend.Driver, func(), error)) Peer {
	return Peer{
		Name:  "distlock",
		About: about,
		New: func(ctx context.Context, ttl time.Duration) (measure.Contender, error) {
			d, closeClient, err := newDriver(ctx, ttl)
			if err != nil {
				return nil, err
			}
			// A TTL below the store's shortest (etcd's 2 s) is raised to it.
			ttl = max(ttl, d.Capabilities().MinTTL)
			return &distlockClient{l: distlock.New(d, distlock.WithDefaultTTL(ttl)), closeClient: closeClient}, nil
		},
	}
}

// distlockClient is a Locker over a driver made with New, and the client
// under it, which the driver never closes.
type distlockClient struct {
	l           *distlock.Locker
	closeClient func()
}

func (c *distlockClient) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	le, err := c.l.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return le.Release, nil
}

// Locker returns the Locker (the bench's semaphore workload uses it).
func (c *distlockClient) Locker() *distlock.Locker { return c.l }

func (c *distlockClient) Close() {
	_ = c.l.Close()
	c.closeClient()
}

// sessionConns is what a lease of sqllock's session mode keeps to
// itself: no connection, unless it was taken after a wait.
const sessionConns = "0 (a lease on one of Sessions=2 shared sessions; one taken after a wait stays on the waiter connection that waited, at most Waiters=2 such; a wait uses one of Waiters=2 connections while it waits)"

// sessionClient is distlock in sqllock's session mode as a peer of its
// own row: a Locker over a driver over a client whose connections go
// through a cutter, so that its crash is the peers' (connections cut).
type sessionClient struct {
	l     *distlock.Locker
	close func()
}

// newSessionClient makes a sessionClient over d (whose client close
// closes).
func newSessionClient(d backend.Driver, ttl time.Duration, close func()) *sessionClient {
	return &sessionClient{l: distlock.New(d, distlock.WithDefaultTTL(max(ttl, d.Capabilities().MinTTL))), close: close}
}

func (c *sessionClient) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	le, err := c.l.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return le.Release, nil
}

func (c *sessionClient) Close() {
	_ = c.l.Close()
	c.close()
}

// abandon: the connections are cut; Close finds the lease's session gone.
func (c *sessionClient) abandon(func(context.Context) error) { c.Close() }
