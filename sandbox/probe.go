package sandbox

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// probeTimeout bounds one probe attempt.
const probeTimeout = 2 * time.Second

// pollInterval is the pause between probe attempts.
const pollInterval = 150 * time.Millisecond

// waitUntil calls try until it succeeds or ctx ends; the error then names
// the last failure.
func waitUntil(ctx context.Context, try func(context.Context) error) error {
	t := time.NewTimer(0)
	defer t.Stop()
	var last error
	for {
		select {
		case <-ctx.Done():
			if last == nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w (last attempt: %v)", ctx.Err(), last)
		case <-t.C:
		}
		attempt, cancel := context.WithTimeout(ctx, probeTimeout)
		last = try(attempt)
		cancel()
		if last == nil {
			return nil
		}
		t.Reset(pollInterval)
	}
}

// probeLive checks that the server at addr answers its protocol, even if it
// cannot serve yet (an ensemble member without quorum).
// tc is the client TLS configuration of a TLS server, else nil.
func probeLive(ctx context.Context, kind Kind, addr string, tc *tls.Config) error {
	switch kind {
	case ZooKeeper:
		_, err := zkFourLetter(ctx, addr, "srvr", tc)
		return err
	case Etcd:
		return etcdGet(ctx, addr, "/version", "etcdserver")
	default:
		return probeServing(ctx, kind, addr, tc)
	}
}

// probeServing checks that the server at addr serves clients; tc is the
// client TLS configuration of a TLS server, else nil.
func probeServing(ctx context.Context, kind Kind, addr string, tc *tls.Config) error {
	switch kind {
	case Redis:
		reply, err := redisCommand(ctx, addr, "PING", tc)
		if err != nil {
			return err
		}
		if reply != "+PONG" {
			return fmt.Errorf("redis PING answered %q", reply)
		}
		return nil
	case MariaDB:
		return mysqlPing(ctx, addr)
	case Postgres:
		return postgresPing(ctx, addr, tc)
	case ZooKeeper:
		out, err := zkFourLetter(ctx, addr, "srvr", tc)
		if err != nil {
			return err
		}
		if !strings.Contains(out, "Mode: ") {
			return fmt.Errorf("zookeeper srvr answered %q", firstLine(out))
		}
		return nil
	case Etcd:
		return etcdGet(ctx, addr, "/health", `"health":"true"`)
	}
	return fmt.Errorf("sandbox: no probe for kind %q", kind)
}

// redisCommand sends one inline command and returns the first reply line
// ("+PONG", "-LOADING ..."). Only for simple commands with simple replies.
func redisCommand(ctx context.Context, addr, cmd string, tc *tls.Config) (string, error) {
	conn, err := dialTLS(ctx, addr, tc, "redis")
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, cmd+"\r\n"); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("redis %s: %w", cmd, err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// mysqlPing checks that a MySQL/MariaDB server accepts connections: it
// reads the server's greeting, a protocol-10 handshake. The official
// images and the substitute ones initialise the database with networking
// off (mariadbd --skip-networking), and the local provider before the
// server starts (--init-file), so a greeting on the TCP port comes from
// the final server with the sandbox database in place. (Over the raw
// protocol, so that the sandbox imports no SQL driver: the drivers'
// tests that import it carry no other store's client.)
func mysqlPing(ctx context.Context, addr string) error {
	return mysqlGreeting(ctx, addr)
}

// postgresPing checks that a PostgreSQL server accepts connections, over
// TLS when tc is set: it sends a startup message for the sandbox user and
// database and reads the first reply. An authentication request means the
// server has passed the checks of a starting, recovering or shutting-down
// server (SQLSTATE 57P03) and now authenticates; so does an error other
// than 57P03 (a pg_hba.conf refusal). The images' entrypoints initialise
// the cluster with TCP off (listen_addresses=”), and the local provider
// before the server starts, so the sandbox database exists by then.
func postgresPing(ctx context.Context, addr string, tc *tls.Config) error {
	conn, err := dial(ctx, addr)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	var rw io.ReadWriter = conn
	if tc != nil {
		// SSLRequest: length 8, code 80877103.
		if _, err := conn.Write([]byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f}); err != nil {
			return fmt.Errorf("postgres SSLRequest: %w", err)
		}
		var answer [1]byte
		if _, err := io.ReadFull(conn, answer[:]); err != nil {
			return fmt.Errorf("postgres SSLRequest: %w", err)
		}
		if answer[0] != 'S' {
			return fmt.Errorf("postgres SSLRequest answered %q, want S", answer[0])
		}
		tconn := tls.Client(conn, serverName(tc, addr))
		if err := tconn.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("postgres tls handshake: %w", err)
		}
		rw = tconn
	}
	// StartupMessage: length, protocol 3.0, name/value pairs, a final 0.
	body := []byte{0, 3, 0, 0}
	for _, kv := range []string{"user", PostgresUser, "database", Database} {
		body = append(append(body, kv...), 0)
	}
	body = append(body, 0)
	msg := binary.BigEndian.AppendUint32(nil, uint32(len(body)+4))
	if _, err := rw.Write(append(msg, body...)); err != nil {
		return fmt.Errorf("postgres startup: %w", err)
	}
	var head [5]byte // type, length
	if _, err := io.ReadFull(rw, head[:]); err != nil {
		return fmt.Errorf("postgres startup: %w", err)
	}
	switch head[0] {
	case 'R':
		return nil
	case 'E':
		n := binary.BigEndian.Uint32(head[1:]) - 4
		if n > 64<<10 {
			return fmt.Errorf("postgres startup: error reply of %d bytes", n)
		}
		fields := make([]byte, n)
		if _, err := io.ReadFull(rw, fields); err != nil {
			return fmt.Errorf("postgres startup: %w", err)
		}
		code, msg := postgresErrorFields(fields)
		if code == "57P03" || code == "" {
			return fmt.Errorf("postgres: %s (SQLSTATE %s)", msg, code)
		}
		return nil
	}
	return fmt.Errorf("postgres startup answered message type %q", head[0])
}

// postgresErrorFields returns the SQLSTATE (field C) and message (field M)
// of an ErrorResponse body.
func postgresErrorFields(b []byte) (code, msg string) {
	for len(b) > 1 {
		typ := b[0]
		val, rest, ok := strings.Cut(string(b[1:]), "\x00")
		if !ok {
			break
		}
		switch typ {
		case 'C':
			code = val
		case 'M':
			msg = val
		}
		b = []byte(rest)
	}
	return code, msg
}

// mysqlGreeting reads the first packet a MySQL/MariaDB server sends and
// checks that it is a protocol-10 handshake.
func mysqlGreeting(ctx context.Context, addr string) error {
	conn, err := dial(ctx, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	var head [5]byte // 3-byte length, sequence number, protocol version
	if _, err := io.ReadFull(conn, head[:]); err != nil {
		return fmt.Errorf("mysql greeting: %w", err)
	}
	if head[4] != 10 {
		return fmt.Errorf("mysql greeting: protocol %d, want 10", head[4])
	}
	return nil
}

// zkFourLetter sends a ZooKeeper four-letter command and returns the
// answer; tc is the client TLS configuration of a TLS server (Netty answers
// four-letter words on its secure port too), else nil.
func zkFourLetter(ctx context.Context, addr, cmd string, tc *tls.Config) (string, error) {
	conn, err := dialTLS(ctx, addr, tc, "zookeeper")
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, cmd); err != nil {
		return "", err
	}
	out, err := io.ReadAll(io.LimitReader(conn, 64<<10))
	if err != nil {
		return "", fmt.Errorf("zookeeper %s: %w", cmd, err)
	}
	if len(out) == 0 {
		return "", fmt.Errorf("zookeeper %s: empty answer", cmd)
	}
	return string(out), nil
}

// etcdGet fetches http://addr+path and checks that the body contains want.
// Keep-alives are off so no connection (or goroutine) outlives the call.
func etcdGet(ctx context.Context, addr, path, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return err
	}
	if !strings.Contains(string(body), want) {
		return fmt.Errorf("etcd %s answered %d %q", path, resp.StatusCode, firstLine(string(body)))
	}
	return nil
}

// dial opens a TCP connection bounded by ctx, with ctx's deadline applied to
// the connection's reads and writes too.
func dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(dl); err != nil {
			return nil, errors.Join(err, conn.Close())
		}
	}
	return conn, nil
}

// dialTLS is dial, then over TLS when tc is set (verifying the host of
// addr; a failed handshake is the error of server's, e.g. "redis", tls
// handshake).
func dialTLS(ctx context.Context, addr string, tc *tls.Config, server string) (net.Conn, error) {
	conn, err := dial(ctx, addr)
	if err != nil || tc == nil {
		return conn, err
	}
	tconn := tls.Client(conn, serverName(tc, addr))
	if err := tconn.HandshakeContext(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("%s tls handshake: %w", server, err), conn.Close())
	}
	return tconn, nil
}

// serverName returns a copy of tc that verifies the host of addr.
func serverName(tc *tls.Config, addr string) *tls.Config {
	tc = tc.Clone()
	if tc.ServerName == "" {
		tc.ServerName, _, _ = net.SplitHostPort(addr)
	}
	return tc
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
