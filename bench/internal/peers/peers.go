package peers

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/bench/internal/measure"
)

// Peer is one lock library on one store, or the store's bare round trip.
type Peer struct {
	// Name labels the library, e.g. "redsync".
	Name string
	// About says how the library is driven: how it waits, what its crash
	// is.
	About string
	// New returns a client with connections of its own, whose Acquire
	// waits until the key is held or ctx ends.
	New func(ctx context.Context, ttl time.Duration) (measure.Contender, error)
	// Crash, nil for a floor, takes key with a new client, cuts that
	// client's connections and frees it without a word to the store. It
	// returns when the connections were cut.
	Crash func(ctx context.Context, key string, ttl time.Duration) (died time.Time, err error)
	// Module is the Go module the library comes from
	// ("github.com/go-redsync/redsync/v4"), whose version the report
	// gives (see [ModuleVersion]); empty for a floor.
	Module string
	// Conns says how many of the store's connections a held lease keeps
	// to itself, and why: "1 (pinned while held)", "0 (a shared pool)".
	Conns string
	// Fenced marks a fenced floor: the least lock of the store's kind
	// with a fencing token, written in the benchmark (fenced.go).
	Fenced bool
}

// from returns p with its module and its connections per lease.
func (p Peer) from(module, conns string) Peer {
	p.Module, p.Conns = module, conns
	return p
}

// Info is what a server says of itself.
type Info struct {
	Version  string
	Settings []string
}

// Store is what the comparison uses of one store besides distlock.
type Store struct {
	// Peers are the other lock libraries for this store.
	Peers []Peer
	// Floor is one bare round trip as an "acquire" with nothing to release.
	Floor Peer
	// Fenced are the store's fenced floors (Peer.Fenced), none where the
	// store's own lock hands out a token for free (etcd, ZooKeeper).
	Fenced []Peer
	// Distlock is distlock built the way a program that already has a
	// client of the store builds it: the driver's New over a client made
	// like the peers' (its library's defaults). Its Crash is nil.
	Distlock Peer
	// Conns says how many of the store's connections a lease of distlock
	// keeps to itself, as Peer.Conns.
	Conns string
	// Info asks the server for its version and settings.
	Info func(ctx context.Context) (Info, error)
	// Counters reads the server's counters of the requests it received
	// and of its flushes to disk (fsyncs), both since it started: Redis
	// commands; MariaDB statements and statement preparations (a batch of
	// statements counts each); ZooKeeper packets; etcd gRPC messages,
	// unary requests and stream messages alike. fsyncs is NaN where the
	// server does not count them. Reading them is a request too.
	Counters func(ctx context.Context) (requests, fsyncs float64, err error)
}

// ErrNoPeers is returned for a store the package has nothing for.
var ErrNoPeers = errors.New("no peer libraries")

// For returns the peers, floor and server information of the store a
// distlock URL names (Redlock for redis://h1,h2,...?mode=redlock). It
// returns an error wrapping [ErrNoPeers] for an in-process store (mem://),
// and for what the peers here do not handle: TLS and several hosts (but
// Redlock's). Distlock is left zero when the URL has options a distlock
// made by New over the peers' client would not have.
func For(rawURL string) (*Store, error) {
	u, err := backend.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if hasTLSParam(rawURL) {
		return nil, fmt.Errorf("%w over TLS", ErrNoPeers)
	}
	query := queryOf(rawURL)
	redlock := u.Scheme == "redis" && query.Get("mode") == "redlock"
	if len(u.Hosts) > 1 && !redlock {
		return nil, fmt.Errorf("%w for several hosts", ErrNoPeers)
	}
	var st *Store
	switch {
	case redlock:
		st, err = redlockStore(u)
		query.Del("mode")
	case u.Scheme == "redis":
		st, err = redisStore(u)
	case u.Scheme == "mysql":
		st, err = sqlStore(u)
	case u.Scheme == "postgres" || u.Scheme == "postgresql":
		st, err = postgresStore(u, rawURL)
		query.Del("sslmode") // the peers' client has the same
	case u.Scheme == "etcd":
		st, err = etcdStore(u)
	case u.Scheme == "zk":
		st, err = zkStore(u)
	default:
		return nil, fmt.Errorf("%w for %s://", ErrNoPeers, u.Scheme)
	}
	if err == nil && len(query) > 0 {
		// distlock made by New would not have the URL's options.
		st.Distlock = Peer{}
	}
	return st, err
}

// queryOf returns the URL's query parameters (none if it cannot parse
// them).
func queryOf(rawURL string) url.Values {
	_, query, _ := strings.Cut(rawURL, "?")
	q, _ := url.ParseQuery(query)
	return q
}

// hasTLSParam reports whether the URL has a tls... parameter.
func hasTLSParam(rawURL string) bool {
	q := queryOf(rawURL)
	if m := q.Get("sslmode"); m != "" && m != "disable" { // PostgreSQL
		return true
	}
	for k := range q {
		if strings.HasPrefix(k, "tls") {
			return true
		}
	}
	return false
}

// client is a peer's contender, which a crash abandons.
type client interface {
	measure.Contender
	// abandon frees the client after its connections were cut, sending
	// the store nothing it could act on. release is the held lock's.
	abandon(release func(context.Context) error)
}

// newClientFunc makes a client whose connections go through cut (nil:
// plain connections).
type newClientFunc func(ctx context.Context, ttl time.Duration, cut *cutter) (client, error)

// peer makes a Peer of a client constructor.
func peer(name, about string, newClient newClientFunc) Peer {
	return Peer{
		Name:  name,
		About: about,
		New: func(ctx context.Context, ttl time.Duration) (measure.Contender, error) {
			return newClient(ctx, ttl, nil)
		},
		Crash: func(ctx context.Context, key string, ttl time.Duration) (time.Time, error) {
			cut := &cutter{}
			x, err := newClient(ctx, ttl, cut)
			if err != nil {
				return time.Time{}, err
			}
			release, err := x.Acquire(ctx, key)
			if err != nil {
				x.Close()
				return time.Time{}, err
			}
			cut.cutAll()
			died := time.Now()
			x.abandon(release)
			return died, nil
		},
	}
}

// fencedPeer makes a fenced floor of a client constructor.
func fencedPeer(name, about string, newClient newClientFunc) Peer {
	p := peer("fenced floor ("+name+")", "the fenced floor: "+about, newClient)
	p.Fenced = true
	return p
}

// floor makes a Peer of one round trip.
func floor(name string, open func() (roundTrip func(context.Context) error, closeFn func(), err error)) Peer {
	return Peer{Name: name, About: "one bare round trip to the store, nothing to release", New: func(context.Context, time.Duration) (measure.Contender, error) {
		do, closeFn, err := open()
		if err != nil {
			return nil, err
		}
		return floorClient{do, closeFn}, nil
	}}
}

type floorClient struct {
	do      func(context.Context) error
	closeFn func()
}

func (f floorClient) Acquire(ctx context.Context, _ string) (func(context.Context) error, error) {
	if err := f.do(ctx); err != nil {
		return nil, err
	}
	return func(context.Context) error { return nil }, nil
}

func (f floorClient) Close() { f.closeFn() }

// releaseTimeout bounds a release sent over a cut connection.
const releaseTimeout = time.Second
