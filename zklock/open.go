package zklock

import (
	"context"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
)

func init() {
	backend.Register("zk", open)
	backend.Register("zks", open)
}

// URL defaults.
const (
	defaultPort           = 2181
	defaultSessionTimeout = 10 * time.Second
	defaultConnectTimeout = 10 * time.Second
	// The session timeouts a URL may ask for.
	minSessionTimeout = 100 * time.Millisecond
	maxSessionTimeout = 24 * time.Hour
)

// The values of the acl URL parameter.
const (
	aclOpen        = "open"
	aclCreator     = "creator"
	aclCreatorRead = "creator-read"
)

// urlConfig is what a zk:// URL says.
type urlConfig struct {
	hosts []string
	dial  dialConfig
	opts  Options
}

// parseURL validates every part of u and reports all problems at once.
func parseURL(u *backend.URL) (urlConfig, error) {
	var c urlConfig
	if len(u.Hosts) == 0 {
		u.Query.Fail("no host: want %s://host:2181[,host:2181...]/base", u.Scheme)
	}
	c.hosts = u.HostsWithDefaultPort(defaultPort)
	base, err := cleanBase(u.Path)
	if err != nil {
		u.Query.Fail("%v", err)
	}
	c.opts.Base = base
	// The session timeout is every lock's TTL here, so the portable ttl
	// parameter sizes it unless session_timeout says otherwise.
	ttl := u.Query.DurationIn("ttl", defaultSessionTimeout, minSessionTimeout, maxSessionTimeout)
	c.dial.timeout = u.Query.DurationIn("session_timeout", ttl, minSessionTimeout, maxSessionTimeout)
	c.dial.connectTimeout = u.Query.Duration("connect_timeout", defaultConnectTimeout)
	c.dial.user = u.Username()
	pass, hasPass := u.Password()
	c.dial.password = pass
	if u.User != nil && (c.dial.user == "" || !hasPass) {
		u.Query.Fail("credentials: want user:password@ for digest authentication")
	}
	def := aclOpen
	if c.dial.user != "" {
		def = aclCreator
	}
	mode := u.Query.Enum("acl", def, aclOpen, aclCreator, aclCreatorRead)
	if mode != aclOpen && c.dial.user == "" {
		u.Query.Fail("parameter acl=%s needs credentials in the URL (zk://user:password@host/...)", mode)
	}
	c.opts.ACL = aclFor(mode)
	c.dial.tls = u.Query.TLS(u.Scheme == "zks", "zks")
	c.opts.SessionTimeout = c.dial.timeout
	return c, u.Query.Err()
}

// aclFor returns the ACL of an acl URL parameter value.
func aclFor(mode string) []zk.ACL {
	switch mode {
	case aclCreator:
		return zk.AuthACL(zk.PermAll)
	case aclCreatorRead:
		return append(zk.AuthACL(zk.PermAll), zk.WorldACL(zk.PermRead)...)
	default:
		return zk.WorldACL(zk.PermAll)
	}
}

// open is the backend.Opener of zk:// URLs. It dials and waits for the
// session, bounded by ctx and connect_timeout.
func open(ctx context.Context, u *backend.URL) (backend.Driver, error) {
	c, err := parseURL(u)
	if err != nil {
		return nil, fmt.Errorf("zklock: %w", err)
	}
	return dialDriver(ctx, c)
}

// dialDriver connects as c says and returns a Driver owning the connection.
func dialDriver(ctx context.Context, c urlConfig) (*Driver, error) {
	conn, sess, err := connect(ctx, c.hosts, c.dial)
	if err != nil {
		return nil, err
	}
	d, err := newDriver(conn, c.opts, true, sess)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return d, nil
}
