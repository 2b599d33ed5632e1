package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/distlock/distlock/backend"
)

func init() {
	backend.Register("etcd", open)
	backend.Register("etcds", open)
}

// DefaultPort is the port used for hosts given without one.
const DefaultPort = 2379

// DefaultDialTimeout bounds the connection to the cluster when the URL has
// no dial_timeout.
const DefaultDialTimeout = 5 * time.Second

// The gRPC keepalive of the clients Open makes: a connection silent for
// keepAliveTime is pinged (gRPC's minimum: a shorter time is raised to
// it), and closed if the ping is unanswered for keepAliveTimeout, so the
// client dials again. Without it (clientv3's default) a connection that
// died without a reset (a NAT or firewall that dropped its state, a
// member's host gone) carries every request into the void until the
// kernel gives up retransmitting, about 15 minutes on Linux: every lease
// is lost and nothing can be acquired meanwhile
// (TestOpenSurvivesDeadConnection). etcd's servers accept pings this
// often (their --grpc-keepalive-min-time is 5 s).
const (
	keepAliveTime    = 10 * time.Second
	keepAliveTimeout = 5 * time.Second
)

// config is what a URL asks for.
type config struct {
	client  clientv3.Config
	options Options
}

// parseURL turns a parsed etcd:// or etcds:// URL into a client
// configuration and driver options, without dialing.
func parseURL(u *backend.URL) (*config, error) {
	q := u.Query
	c := &config{}
	c.options.TTL = q.Duration("ttl", DefaultTTL)
	c.client.DialTimeout = q.Duration("dial_timeout", DefaultDialTimeout)
	c.client.DialKeepAliveTime, c.client.DialKeepAliveTimeout = keepAliveTime, keepAliveTimeout
	c.options.Prefix = u.Path
	tc := q.TLS(u.Scheme == "etcds", "etcds")
	if err := q.Err(); err != nil {
		return nil, fmt.Errorf("etcdlock: %w", err)
	}
	if len(u.Hosts) == 0 {
		return nil, fmt.Errorf("etcdlock: %w: no host (want e.g. etcd://127.0.0.1:2379/locks)", backend.ErrInvalidConfig)
	}
	if _, err := normalizePrefix(u.Path); err != nil {
		return nil, fmt.Errorf("etcdlock: %w", err)
	}
	if _, err := leaseTTL(c.options.TTL); err != nil {
		return nil, fmt.Errorf("etcdlock: parameter ttl: %w", err)
	}
	if u.User != nil {
		c.client.Username = u.Username()
		c.client.Password, _ = u.Password()
		if c.client.Username == "" {
			return nil, fmt.Errorf("etcdlock: %w: a password needs a user name", backend.ErrInvalidConfig)
		}
	}
	c.client.TLS = tc
	for _, h := range u.HostsWithDefaultPort(DefaultPort) {
		scheme := "http://"
		if tc != nil {
			scheme = "https://"
		}
		c.client.Endpoints = append(c.client.Endpoints, scheme+h)
	}
	return c, nil
}

// open is the Opener for etcd:// and etcds://. It dials the cluster and
// confirms it answers a read, bounded by ctx and dial_timeout; the driver
// closes the client.
func open(ctx context.Context, u *backend.URL) (backend.Driver, error) {
	c, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	c.client.Context = context.WithoutCancel(ctx)
	c.client.Logger = zap.NewNop()
	c.client.DialTimeout = min(c.client.DialTimeout, untilDeadline(ctx))
	cli, err := clientv3.New(c.client)
	if err != nil {
		kind := backend.ErrUnavailable
		if errors.Is(err, rpctypes.ErrAuthFailed) {
			kind = backend.ErrInvalidConfig // wrong user name or password
		}
		return nil, fmt.Errorf("etcdlock: connect to %s: %w: %w", strings.Join(u.Hosts, ","), kind, err)
	}
	// clientv3.New dials without waiting for the connection: confirm the
	// cluster answers (a count-only read of the prefix, which the lock
	// user may read anyway) within ctx and dial_timeout.
	pctx, cancel := context.WithTimeout(ctx, c.client.DialTimeout)
	defer cancel()
	if _, err := cli.Get(pctx, pingKey(c.options.Prefix), clientv3.WithCountOnly(), clientv3.WithSerializable()); err != nil {
		_ = cli.Close()
		kind := backend.ErrUnavailable
		if errors.Is(err, rpctypes.ErrAuthFailed) || errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrUserEmpty) {
			kind = backend.ErrInvalidConfig
		}
		return nil, fmt.Errorf("etcdlock: connect to %s: %w: %w", strings.Join(u.Hosts, ","), kind, err)
	}
	d, err := newDriver(cli, true, c.options)
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	return d, nil
}

// pingKey is the key Open reads to confirm the cluster answers: the
// prefix's own (normalized) key.
func pingKey(prefix string) string {
	p, err := normalizePrefix(prefix)
	if err != nil || p == "" {
		return "distlock/"
	}
	return p
}

// untilDeadline is the time left before ctx's deadline, or a long time.
func untilDeadline(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return time.Hour
}
