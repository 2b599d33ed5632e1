package sandbox

import (
	"bufio"
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	// The MariaDB probe talks the real protocol.
	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
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
	conn, err := dial(ctx, addr)
	if err != nil {
		return "", err
	}
	if tc != nil {
		tconn := tls.Client(conn, serverName(tc, addr))
		if err := tconn.HandshakeContext(ctx); err != nil {
			return "", errors.Join(fmt.Errorf("redis tls handshake: %w", err), conn.Close())
		}
		conn = tconn
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

// mysqlPing connects as root to the sandbox database and runs SELECT 1.
// It first reads the server's greeting on a raw connection, so that the
// driver (which logs every failed read) only talks to a listening server,
// not to a port forwarder in front of a server still starting.
func mysqlPing(ctx context.Context, addr string) error {
	if err := mysqlGreeting(ctx, addr); err != nil {
		return err
	}
	// tls=preferred: TLS without verification if the server offers it, so
	// a server with --require-secure-transport (Spec.MariaDBTLS) answers.
	db, err := sql.Open("mysql", MySQLDSN(addr)+"&tls=preferred")
	if err != nil {
		return err
	}
	defer db.Close()
	var one int
	if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("mysql SELECT 1: %w", err)
	}
	return nil
}

// postgresPing connects as the sandbox superuser to the sandbox database,
// over TLS when tc is set, and runs SELECT 1.
func postgresPing(ctx context.Context, addr string, tc *tls.Config) error {
	cfg, err := pgx.ParseConfig(PostgresURL(addr))
	if err != nil {
		return err
	}
	if tc != nil {
		cfg.TLSConfig = serverName(tc, addr)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("postgres connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("postgres SELECT 1: %w", err)
	}
	return nil
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
	conn, err := dial(ctx, addr)
	if err != nil {
		return "", err
	}
	if tc != nil {
		tconn := tls.Client(conn, serverName(tc, addr))
		if err := tconn.HandshakeContext(ctx); err != nil {
			return "", errors.Join(fmt.Errorf("zookeeper tls handshake: %w", err), conn.Close())
		}
		conn = tconn
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
