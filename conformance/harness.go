// Package conformance is the test suite every distlock backend must pass,
// against a real store. A backend's test calls Run with a Maker that
// returns a Harness: a way to make independent clients of the store (as
// separate processes would) and to inject faults.
//
//	func TestConformance(t *testing.T) {
//		srv := startServer(t)
//		conformance.Run(t, func(ctx context.Context, t *testing.T) (conformance.Harness, error) {
//			return &harness{srv: srv}, nil
//		})
//	}
//
// Every case runs as a subtest named after the rule it checks, under a
// watchdog that fails the run (with every goroutine's stack) instead of
// letting a hung backend hang CI. Cases a store cannot support (per its
// backend.Capabilities, or because the harness lacks a fault hook) are
// skipped with the reason.
package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
)

// Harness gives the suite access to one store under test.
type Harness interface {
	// NewDriver returns a new client of the store, with its own connections
	// and session, as an independent process would make.
	NewDriver(ctx context.Context) (backend.Driver, error)
	// TTL is the lease TTL the suite uses: as short as the store honours
	// reliably (around 1 s for most stores). Bounds in the suite are
	// multiples of it.
	TTL() time.Duration
	// Kill cuts d off from the store as if its process had died: its
	// connections close without releasing anything, and later calls on d
	// fail. Its locks then end the way the store ends a dead client's locks
	// (TTL, session expiry, connection close).
	Kill(ctx context.Context, d backend.Driver) error
	// Delete removes key's lock in the store behind its holder's back (a
	// server-side delete, a session or lease revoked, a connection killed
	// by the server).
	Delete(ctx context.Context, key string) error
	// Close releases what the harness made for one case.
	Close() error
}

// ServerControl is implemented by harnesses that can stop and restart the
// store's server(s). Cases about outages are skipped without it.
type ServerControl interface {
	// StopServer makes the store unreachable (server stopped or paused).
	StopServer(ctx context.Context) error
	// StartServer makes it reachable again, with its data kept as the
	// server would keep it over a restart.
	StartServer(ctx context.Context) error
}

// Partitioner is implemented by harnesses that can cut one driver's
// network path to the store without closing anything, as a partition
// would (packets black-holed in both directions), and heal it. Cases about
// partitions are skipped without it.
type Partitioner interface {
	// Partition black-holes every connection d has, or makes, to the store
	// until Heal: requests and replies are held back, not refused, and
	// nothing is closed by the cut itself.
	Partition(ctx context.Context, d backend.Driver) error
	// Heal restores d's path to the store; connections the cut did not
	// close carry traffic again.
	Heal(ctx context.Context, d backend.Driver) error
}

// ReplyDropper is implemented by harnesses that can lose one reply of the
// store to d: the next request d sends reaches the store and runs there,
// and its reply is discarded and the connection reset, so d sees a failed
// call whose effect happened (what a timeout after the write, a proxy
// restart or a lost packet followed by a reset looks like). The client's
// own retry policy then applies, as configured by the harness the way
// users configure it. Cases about lost replies are skipped without it.
type ReplyDropper interface {
	// DropNextReply arms the loss for d's next request; it returns at once.
	DropNextReply(ctx context.Context, d backend.Driver) error
	// Dropped reports how many replies to d were dropped so far.
	Dropped(d backend.Driver) int
}

// UserClients is implemented by harnesses that can make a driver the way
// a service makes one: over its own store client, built with the client
// library's defaults and nothing more (go-redis NewClient with only Addr,
// sql.Open with the DSN, a pgx pool, clientv3.New, zk.Connect), passed to
// the backend package's New. Such a client may not honour ctx deadlines
// (go-redis without ContextTimeoutEnabled waits out its ReadTimeout), so
// the stall cases run with it too: the portable layer, not the client,
// must end a lease at its deadline. Partition, Kill and DropNextReply work
// on such drivers as on NewDriver's; the harness closes the client it made
// when it is closed.
type UserClients interface {
	// NewUserDriver returns a driver over a new user-made client, with its
	// own connections and session.
	NewUserDriver(ctx context.Context) (backend.Driver, error)
}

// NativeErrors is implemented by harnesses that know their store client's
// own error types. Where a case gets a store error (ErrUnavailable), it
// checks that errors.As (or errors.Is for a client's sentinel errors)
// reaches the client's error through whatever the driver and the portable
// layer wrapped around it, so users can inspect it as go-cloud's drivertest
// checks for its drivers.
type NativeErrors interface {
	// NativeError reports whether err wraps an error of the store's client
	// (a go-redis, MySQL driver, go-zookeeper or etcd client error, or a
	// net.Error from its connection).
	NativeError(err error) bool
}

// Maker returns a Harness for one case. It is called once per case, so it
// should be cheap: start servers once, outside it.
type Maker func(ctx context.Context, t *testing.T) (Harness, error)
