package redisproto

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
)

// Modes selected by the mode URL parameter.
const (
	ModeSingle  = "single"
	ModeCluster = "cluster"
	ModeRedlock = "redlock"
)

// Config is what a URL says about the connections.
type Config struct {
	Mode     string
	Addrs    []string
	DB       int
	Username string
	Password string
	TLS      *tls.Config
	Dial     time.Duration
	Read     time.Duration
	Write    time.Duration
	Pool     int
	Refresh  time.Duration // Cluster: slot map reload interval
	Evicting bool          // allow_eviction: accept servers that may evict keys

	// What the URL says of the driver: prefix, wait, wait_replicas,
	// wait_timeout.
	Prefix       string
	Wait         WaitMode
	WaitReplicas int
	WaitTimeout  time.Duration
}

// ping sends PING through every client at once and wants at least need
// answers, within ctx and the dial and read timeouts; else ErrUnavailable.
// A server that refuses the login (NOAUTH: it wants a password; WRONGPASS:
// wrong user or password, or a disabled user) fails it with
// ErrInvalidConfig, as no retry fixes that.
func (cfg Config) Ping(ctx context.Context, clients []redis.UniversalClient, need int) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Dial+cfg.Read)
	defer cancel()
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() { errs[i] = c.Ping(ctx).Err() })
	}
	wg.Wait()
	ok := 0
	var failed []error
	for i, err := range errs {
		if err != nil && strings.Contains(err.Error(), "DB index is out of range") {
			return fmt.Errorf("redislock: %w: database %d: the server at %s has fewer databases: %w", backend.ErrInvalidConfig, cfg.DB, cfg.Addrs[i], err)
		}
		if err != nil && LoginRefused(err) {
			return fmt.Errorf("redislock: %w: %s", backend.ErrInvalidConfig, cfg.loginErr(cfg.Addrs[i], err))
		}
		if err == nil || NotAllowed(err) {
			// A command the ACL refuses (NOPERM) is an answer: the first
			// lock call reports it (ErrInvalidConfig).
			ok++
			continue
		}
		failed = append(failed, fmt.Errorf("%s: %w", cfg.Addrs[i], err))
	}
	if ok >= need {
		return nil
	}
	return fmt.Errorf("redislock: connect: %w: %d of %d node(s) answered PING, %d needed: %w",
		backend.ErrUnavailable, ok, len(clients), need, errors.Join(failed...))
}

// loginErr explains a login the server at addr refused: which user, and
// whether a password was given (never the password itself).
func (cfg Config) loginErr(addr string, err error) string {
	user := cfg.Username
	if user == "" {
		user = "default"
	}
	msg := strings.TrimSpace(strings.ReplaceAll(err.Error(), "\n", " "))
	switch {
	case cfg.Password == "" && strings.Contains(msg, "NOAUTH"):
		return fmt.Sprintf("the server at %s wants a password and the URL gives none (redis://user:PASSWORD@host): %s", addr, msg)
	case cfg.Password == "":
		return fmt.Sprintf("the server at %s refused user %q without a password: %s", addr, user, msg)
	}
	return fmt.Sprintf("the server at %s refused user %q with the password given: %s", addr, user, msg)
}

// checkEviction asks every server behind clients (every node of a
// Cluster, every Redlock node) for its memory limit and eviction policy
// (INFO memory) and refuses, with ErrInvalidConfig, a server that has a
// maxmemory and a maxmemory-policy other than noeviction: under memory
// pressure it deletes keys, and an evicted lock lets a second owner in
// while the first still holds it, an evicted fencing counter starts again
// at 1 (tokens go backwards). A server that does not answer, or whose ACL
// refuses INFO, is not judged: the lock calls report what is wrong with it.
//
// allow_eviction=true in the URL skips the check, for a server whose
// policy the user cannot change and whose memory the locks never fill.
func (cfg Config) CheckEviction(ctx context.Context, clients []redis.UniversalClient) error {
	if cfg.Evicting {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Dial+cfg.Read)
	defer cancel()
	var mu sync.Mutex
	var bad []error
	judge := func(c *redis.Client) {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return
		}
		if err := evictionErr(c.Options().Addr, info); err != nil {
			mu.Lock()
			bad = append(bad, err)
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			switch c := c.(type) {
			case *redis.ClusterClient:
				_ = c.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error {
					judge(c)
					return nil
				})
			case *redis.Client:
				judge(c)
			}
		})
	}
	wg.Wait()
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("redislock: %w: %w", backend.ErrInvalidConfig, errors.Join(bad...))
}

// evictionErr reads INFO memory's reply info from the server at addr: an
// error naming the policy if the server may evict keys, else nil (also
// when the reply lacks the fields).
func evictionErr(addr, info string) error {
	var limit int64
	policy := ""
	for line := range strings.SplitSeq(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "maxmemory:"); ok {
			limit, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "maxmemory_policy:"); ok {
			policy = v
		}
	}
	if limit <= 0 || policy == "" || policy == "noeviction" {
		return nil
	}
	return fmt.Errorf("the server at %s may evict keys (maxmemory %d, maxmemory-policy %s): an evicted lock lets a second owner in, an evicted fencing counter sends tokens backwards; set maxmemory-policy noeviction (or, knowing the risk, allow_eviction=true in the URL)", addr, limit, policy)
}

func CloseAll(clients []redis.UniversalClient) {
	for _, c := range clients {
		_ = c.Close()
	}
}

// ParseConfig reads every part of u. Errors wrap ErrInvalidConfig and name
// the bad part; they never contain the password.
func ParseConfig(u *backend.URL) (Config, error) {
	q := u.Query
	cfg := Config{Addrs: u.HostsWithDefaultPort(6379), Username: u.Username()}
	cfg.Password, _ = u.Password()
	if len(cfg.Addrs) == 0 {
		q.Fail("no host: want e.g. %s://127.0.0.1:6379", u.Scheme)
	}
	defMode := ModeSingle
	if len(cfg.Addrs) > 1 {
		defMode = ModeCluster
	}
	cfg.Mode = q.Enum("mode", defMode, ModeSingle, ModeCluster, ModeRedlock)
	if cfg.Mode == ModeSingle && len(cfg.Addrs) > 1 {
		q.Fail("mode=single takes one host, got %d", len(cfg.Addrs))
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		n, err := strconv.Atoi(db)
		switch {
		case err != nil || n < 0:
			q.Fail("path %q: want a database number such as /0", u.Path)
		case n != 0 && cfg.Mode == ModeCluster:
			q.Fail("path %q: Redis Cluster has only database 0", u.Path)
		default:
			cfg.DB = n
		}
	}
	cfg.Dial = q.Duration("dial_timeout", 5*time.Second)
	cfg.Read = q.Duration("read_timeout", 3*time.Second)
	cfg.Write = q.Duration("write_timeout", cfg.Read)
	cfg.Pool = q.Int("pool_size", 0, 1, 10000)
	cfg.Refresh = q.Duration("cluster_refresh", time.Second)
	if q.Has("cluster_refresh") && cfg.Mode != ModeCluster {
		q.Fail("cluster_refresh needs mode=cluster")
	}
	cfg.Prefix = q.String("prefix", DefaultPrefix)
	if err := CheckPrefix(cfg.Prefix); err != nil {
		q.Fail("parameter prefix: %v", err)
	}
	switch q.Enum("wait", "default", "queue", "notify") {
	case "queue":
		cfg.Wait = WaitQueue
	case "notify":
		cfg.Wait = WaitNotify
	}
	cfg.WaitReplicas = q.Int("wait_replicas", 0, 0, 100)
	cfg.WaitTimeout = q.Duration("wait_timeout", time.Second)
	if cfg.WaitReplicas > 0 && cfg.Wait == WaitQueue {
		q.Fail("wait=queue and wait_replicas cannot be combined")
	}
	if cfg.WaitReplicas > 0 && cfg.Mode == ModeRedlock {
		q.Fail("wait_replicas is not supported with mode=redlock")
	}
	if cfg.WaitReplicas > 0 && cfg.Mode == ModeCluster {
		q.Fail("wait_replicas is not supported with mode=cluster")
	}
	if cfg.WaitReplicas > 0 && cfg.WaitTimeout >= cfg.Read {
		q.Fail("wait_timeout=%v must be shorter than read_timeout=%v", cfg.WaitTimeout, cfg.Read)
	}
	cfg.Evicting = q.Bool("allow_eviction", false)
	cfg.TLS = parseTLS(u, q)
	if err := q.Err(); err != nil {
		if cfg.Mode == ModeRedlock {
			return cfg, fmt.Errorf("redlock: %w", err)
		}
		return cfg, fmt.Errorf("redislock: %w", err)
	}
	return cfg, nil
}

// parseTLS returns the TLS config for rediss://, nil for redis://,
// verifying the first host's name unless tls_server_name says otherwise.
func parseTLS(u *backend.URL, q *backend.Params) *tls.Config {
	c := q.TLS(u.Scheme == "rediss", "rediss")
	if c != nil && c.ServerName == "" && len(u.Hosts) > 0 {
		if host, _, err := net.SplitHostPort(u.HostsWithDefaultPort(6379)[0]); err == nil {
			c.ServerName = host
		}
	}
	return c
}

func (cfg Config) Single(addr string) *redis.Options {
	o := &redis.Options{
		Addr: addr, DB: cfg.DB, Username: cfg.Username, Password: cfg.Password, TLSConfig: cfg.TLS,
		DialTimeout: cfg.Dial, ReadTimeout: cfg.Read, WriteTimeout: cfg.Write, PoolSize: cfg.Pool,
		MaxRetries:            -1, // one attempt per call: the portable layer retries
		ContextTimeoutEnabled: true,
	}
	if cfg.TLS != nil {
		o.Dialer, o.DialerRetries = cfg.tlsDialer(), 1
	}
	return o
}

// tlsDialer dials addr and makes the TLS handshake within dial_timeout
// (and ctx), saying "TLS handshake" when that fails: a server that speaks
// no TLS never answers a ClientHello (it waits for the end of a command
// line), and go-redis's own dialer would let each of its five attempts
// run out with no word of TLS. rediss:// clients dial once per call
// (DialerRetries 1): the portable layer retries.
func (cfg Config) tlsDialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: cfg.Dial}
		raw, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		hctx, cancel := context.WithTimeout(ctx, cfg.Dial)
		defer cancel()
		c := tls.Client(raw, cfg.TLS)
		if err := c.HandshakeContext(hctx); err != nil {
			_ = raw.Close()
			if hctx.Err() != nil && !errors.Is(ctx.Err(), context.Canceled) {
				return nil, fmt.Errorf("TLS handshake with %s: no answer within dial_timeout %v (does the server speak TLS? rediss:// wants it; a server without TLS takes redis://): %w", addr, cfg.Dial, err)
			}
			return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		return c, nil
	}
}

func (cfg Config) Cluster() *redis.ClusterOptions {
	o := &redis.ClusterOptions{
		Addrs: cfg.Addrs, Username: cfg.Username, Password: cfg.Password, TLSConfig: cfg.TLS,
		DialTimeout: cfg.Dial, ReadTimeout: cfg.Read, WriteTimeout: cfg.Write, PoolSize: cfg.Pool,
		MaxRetries:            -1, // one attempt per node call (go-redis's cluster default, made explicit)
		MaxRedirects:          3,  // MOVED/ASK during resharding are not failures; go-redis also re-sends after a network error within this bound
		ContextTimeoutEnabled: true,
		// A dead primary answers no MOVED: go-redis keeps sending its
		// slots' commands there until it reloads the slot map, which it
		// does by itself only every 60 s by default. Reloading every
		// second lets clients find a promoted replica within a second.
		ClusterStateReloadInterval: cfg.Refresh,
	}
	if cfg.TLS != nil {
		o.Dialer, o.DialerRetries = cfg.tlsDialer(), 1
	}
	return o
}

// Check is what opening a URL confirms before the driver is returned: at
// least need of clients answer PING (Ping), and no server they reach may
// evict keys (CheckEviction).
func (cfg Config) Check(ctx context.Context, clients []redis.UniversalClient, need int) error {
	if err := cfg.Ping(ctx, clients, need); err != nil {
		return err
	}
	return cfg.CheckEviction(ctx, clients)
}
