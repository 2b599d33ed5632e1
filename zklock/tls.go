package zklock

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/go-zookeeper/zk"
)

// TLSDialer returns a go-zookeeper dialer that speaks TLS with cfg, for a
// connection you make yourself and pass to [New]:
//
//	conn, _, err := zk.Connect(hosts, 10*time.Second, zk.WithDialer(zklock.TLSDialer(cfg)))
//
// (a driver made by New uses the connection as it is, so TLS belongs to the
// connection, not to [Options]). A cfg without ServerName verifies the host
// of the address dialled, so one configuration serves every server of an
// ensemble. The handshake is part of the dial and bounded by its timeout. ZooKeeper serves TLS on
// its secureClientPort (3.5+, with the Netty connection factory).
func TLSDialer(cfg *tls.Config) zk.Dialer {
	return tlsDialer(cfg, net.DialTimeout)
}

// tlsDialer wraps next with a TLS handshake.
func tlsDialer(cfg *tls.Config, next zk.Dialer) zk.Dialer {
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		start := time.Now()
		raw, err := next(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		c := cfg.Clone()
		if c == nil {
			c = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if c.ServerName == "" {
			c.ServerName, _, _ = net.SplitHostPort(addr)
		}
		ctx, cancel := context.WithDeadline(context.Background(), start.Add(timeout))
		defer cancel()
		conn := tls.Client(raw, c)
		if err := conn.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			return nil, &tlsError{addr: addr, err: err}
		}
		return conn, nil
	}
}

// tlsError is a failed TLS handshake with one server.
type tlsError struct {
	addr string
	err  error
}

func (e *tlsError) Error() string {
	return fmt.Sprintf("TLS handshake with %s: %v", e.addr, e.err)
}

func (e *tlsError) Unwrap() error { return e.err }

// verification reports whether the handshake failed because the server's
// certificate was refused (an unknown authority, a wrong name, an expired
// certificate): waiting will not change that.
func (e *tlsError) verification() bool {
	var v *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(e.err, &v) || errors.As(e.err, &unknown) || errors.As(e.err, &host) || errors.As(e.err, &invalid)
}
