package sandbox

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// respConn is a minimal RESP2 client for the sandbox's own Redis commands
// (readiness, cluster creation, replication, leader lookup): one
// connection per call, commands as arrays of bulk strings. The sandbox
// stays free of any Redis client module this way, so a driver's tests
// that import it carry no other store's client.
type respConn struct {
	rw   io.ReadWriteCloser
	r    *bufio.Reader
	addr string
}

// respError is an error reply ("-ERR ...") of the server.
type respError string

func (e respError) Error() string { return string(e) }

// dialRedis connects to the Redis server at addr, over TLS when tc is set
// (verifying the host of addr), bounded by ctx's deadline.
func dialRedis(ctx context.Context, addr string, tc *tls.Config) (*respConn, error) {
	conn, err := dialTLS(ctx, addr, tc, "redis")
	if err != nil {
		return nil, err
	}
	return &respConn{rw: conn, r: bufio.NewReader(conn), addr: addr}, nil
}

// redisDo runs one command on a fresh connection to addr and returns its
// reply: string (simple or bulk), int64, nil (null), []any (array), or an
// error (respError for an error reply).
func redisDo(ctx context.Context, addr string, tc *tls.Config, args ...any) (any, error) {
	c, err := dialRedis(ctx, addr, tc)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.do(args...)
}

// redisText runs one command whose reply is a string.
func redisText(ctx context.Context, addr string, tc *tls.Config, args ...any) (string, error) {
	v, err := redisDo(ctx, addr, tc, args...)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("redis %s: reply %T, want a string", args[0], v)
	}
	return s, nil
}

func (c *respConn) Close() error { return c.rw.Close() }

// do sends one command and reads its reply.
func (c *respConn) do(args ...any) (any, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		s := fmt.Sprint(a)
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(s), s)
	}
	if _, err := io.WriteString(c.rw, b.String()); err != nil {
		return nil, fmt.Errorf("redis %s: %w", args[0], err)
	}
	v, err := c.read(0)
	if err != nil {
		var re respError
		if errors.As(err, &re) {
			return nil, err
		}
		return nil, fmt.Errorf("redis %s: %w", args[0], err)
	}
	return v, nil
}

// read reads one reply; depth bounds nesting.
func (c *respConn) read(depth int) (any, error) {
	if depth > 8 {
		return nil, errors.New("reply nested too deep")
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, respError(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || n > 64<<20 {
			return nil, fmt.Errorf("bad bulk length %q", body)
		}
		if n == -1 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || n > 1<<20 {
			return nil, fmt.Errorf("bad array length %q", body)
		}
		if n == -1 {
			return nil, nil
		}
		arr := make([]any, n)
		for i := range arr {
			// An error inside an array is a value, not a failed read.
			v, err := c.read(depth + 1)
			var re respError
			switch {
			case errors.As(err, &re):
				arr[i] = re
			case err != nil:
				return nil, err
			default:
				arr[i] = v
			}
		}
		return arr, nil
	}
	return nil, fmt.Errorf("unexpected reply %q", firstLine(line))
}
