package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/sandbox"
)

// The fault proxy, against a real Redis through the sandbox.

// proxiedRedis returns a client that dials p, without retries (each
// failure shows), with timeouts long enough that a held request waits
// rather than fails.
func proxiedRedis(t *testing.T, p *sandbox.Proxy) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr: p.Addr(), Protocol: 2, DisableIdentity: true,
		DialTimeout: 2 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
		MaxRetries: -1, PoolSize: 1, ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

func TestProxy(t *testing.T) {
	g := start(t, sandbox.Spec{Kind: sandbox.Redis})
	n := g.Node(0)
	direct := redisClient(t, n.Addr())
	var dials atomic.Int32
	p := sandbox.StartProxyT(t, func() string { dials.Add(1); return n.Addr() })
	c := proxiedRedis(t, p)
	get := func(ctx context.Context, key string) string {
		t.Helper()
		v, err := direct.Get(ctx, key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		return v
	}

	t.Run("forwards", func(t *testing.T) {
		ctx := testCtx(t, 30*time.Second)
		if err := c.Set(ctx, "proxy-fwd", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if v := get(ctx, "proxy-fwd"); v != "v" {
			t.Fatalf("GET through the server = %q, want v", v)
		}
		if dials.Load() == 0 {
			t.Fatal("the target function was never asked")
		}
	})

	t.Run("DropNextReply", func(t *testing.T) {
		ctx := testCtx(t, 30*time.Second)
		if err := c.Set(ctx, "proxy-incr", "0", 0).Err(); err != nil {
			t.Fatal(err)
		}
		before := p.Dropped()
		p.DropNextReply()
		if err := c.Incr(ctx, "proxy-incr").Err(); err == nil {
			t.Fatal("INCR with its reply dropped succeeded")
		} else {
			t.Logf("INCR with its reply dropped: %v", err)
		}
		if got := p.Dropped(); got != before+1 {
			t.Fatalf("Dropped() = %d, want %d", got, before+1)
		}
		if v := get(ctx, "proxy-incr"); v != "1" {
			t.Fatalf("after the lost reply the counter is %q, want 1: the request must run", v)
		}
		// Disarmed: the next call works, on a new connection.
		if v, err := c.Incr(ctx, "proxy-incr").Result(); err != nil || v != 2 {
			t.Fatalf("INCR after the loss = %d, %v; want 2", v, err)
		}
	})

	// A client with go-redis's default retries sends the request again after
	// the lost reply: both deliveries run. (redislock's TestLostReplyRetried
	// relies on this to check its scripts count one.)
	t.Run("DropNextReplyRetried", func(t *testing.T) {
		ctx := testCtx(t, 30*time.Second)
		rc := redis.NewClient(&redis.Options{Addr: p.Addr(), Protocol: 2, DisableIdentity: true})
		defer rc.Close()
		if err := rc.Set(ctx, "proxy-retried", "0", 0).Err(); err != nil {
			t.Fatal(err)
		}
		p.DropNextReply()
		v, err := rc.Incr(ctx, "proxy-retried").Result()
		if err != nil {
			t.Fatalf("INCR retried by the client: %v", err)
		}
		if v != 2 || get(ctx, "proxy-retried") != "2" {
			t.Fatalf("INCR retried after a lost reply returned %d, want 2 (both deliveries ran)", v)
		}
	})

	t.Run("DropReply", func(t *testing.T) {
		ctx := testCtx(t, 30*time.Second)
		if err := c.Set(ctx, "proxy-match", "0", 0).Err(); err != nil {
			t.Fatal(err)
		}
		p.DropReply(func(b []byte) bool { return bytes.Contains(bytes.ToLower(b), []byte("incrby")) }, nil)
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("PING (not matched) failed: %v", err)
		}
		if err := c.IncrBy(ctx, "proxy-match", 5).Err(); err == nil {
			t.Fatal("INCRBY with its reply dropped succeeded")
		}
		if v := get(ctx, "proxy-match"); v != "5" {
			t.Fatalf("counter %q, want 5", v)
		}
		// A reply matcher sees the request and the server's chunks; the
		// loss ends at the one it accepts.
		var sawReq, sawReply atomic.Bool
		p.DropReply(func(b []byte) bool { return bytes.Contains(bytes.ToLower(b), []byte("incrby")) },
			func(req, reply []byte) bool {
				sawReq.Store(bytes.Contains(bytes.ToLower(req), []byte("incrby")))
				sawReply.Store(bytes.HasPrefix(reply, []byte(":10")))
				return true
			})
		if err := c.IncrBy(ctx, "proxy-match", 5).Err(); err == nil {
			t.Fatal("INCRBY with its reply dropped succeeded")
		}
		if !sawReq.Load() || !sawReply.Load() {
			t.Fatalf("reply matcher saw the request: %v, the reply :10: %v", sawReq.Load(), sawReply.Load())
		}
	})

	t.Run("Blackhole", func(t *testing.T) {
		ctx := testCtx(t, 30*time.Second)
		for _, dir := range []sandbox.Direction{sandbox.Both, sandbox.Upstream, sandbox.Downstream} {
			t.Run(dir.String(), func(t *testing.T) {
				key := "proxy-hole-" + dir.String()
				if err := c.Set(ctx, key, "0", 0).Err(); err != nil {
					t.Fatal(err)
				}
				p.Blackhole(dir)
				res := make(chan error, 1)
				go func() { res <- c.Incr(ctx, key).Err() }()
				time.Sleep(500 * time.Millisecond)
				select {
				case err := <-res:
					p.Heal()
					t.Fatalf("INCR returned while black-holed: %v", err)
				default:
				}
				// A request held upstream has not run; one whose reply is
				// held has.
				want := "0"
				if dir == sandbox.Downstream {
					want = "1"
				}
				if v := get(ctx, key); v != want {
					p.Heal()
					t.Fatalf("while black-holed the counter is %q, want %s", v, want)
				}
				p.Heal()
				select {
				case err := <-res:
					if err != nil {
						t.Fatalf("INCR after Heal: %v", err)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("INCR still held 5 s after Heal")
				}
				if v := get(ctx, key); v != "1" {
					t.Fatalf("after Heal the counter is %q, want 1", v)
				}
			})
		}
	})

	t.Run("BlackholeNewConnections", func(t *testing.T) {
		ctx := testCtx(t, 30*time.Second)
		p.Blackhole(sandbox.Both)
		fresh := proxiedRedis(t, p)
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := fresh.Ping(short).Err()
		cancel()
		if err == nil {
			t.Fatal("a new connection answered while black-holed")
		}
		p.Heal()
		began := time.Now()
		if err := fresh.Ping(ctx).Err(); err != nil {
			t.Fatalf("PING after Heal: %v", err)
		}
		t.Logf("PING after Heal took %v", time.Since(began))
	})

	t.Run("Latency", func(t *testing.T) {
		ctx := testCtx(t, 30*time.Second)
		p.Latency(200 * time.Millisecond)
		began := time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		took := time.Since(began)
		p.Heal()
		if took < 400*time.Millisecond {
			t.Fatalf("PING took %v with 200 ms each way, want at least 400 ms", took)
		}
		began = time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(began); took > 300*time.Millisecond {
			t.Logf("PING after Heal took %v (a busy machine?)", took)
		}
	})

	t.Run("Reset", func(t *testing.T) {
		ctx := testCtx(t, 30*time.Second)
		raw, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		if _, err := raw.Write([]byte("PING\r\n")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		if _, err := raw.Read(buf); err != nil {
			t.Fatal(err)
		}
		p.Reset()
		_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = raw.Read(buf)
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("read after Reset: %v, want ECONNRESET", err)
		}
		if err := c.Ping(ctx).Err(); err == nil {
			t.Log("the pooled connection was not used, or was replaced")
		}
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("PING on a new connection after Reset: %v", err)
		}
	})

	t.Run("Refuse", func(t *testing.T) {
		ctx := testCtx(t, 30*time.Second)
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		p.Refuse(true)
		if err := refused(p.Addr()); err != nil {
			p.Heal()
			t.Fatal(err)
		}
		if err := c.Ping(ctx).Err(); err != nil {
			p.Heal()
			t.Fatalf("a current connection failed while refusing new ones: %v", err)
		}
		p.Heal()
		fresh := proxiedRedis(t, p)
		if err := fresh.Ping(ctx).Err(); err != nil {
			t.Fatalf("PING on a new connection after Heal: %v", err)
		}
	})

	t.Run("TargetPerConnection", func(t *testing.T) {
		ctx := testCtx(t, 30*time.Second)
		dead, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		deadAddr := dead.Addr().String()
		dead.Close() // nothing listens there now
		var target atomic.Value
		target.Store(deadAddr)
		q := sandbox.StartProxyT(t, func() string { return target.Load().(string) })
		qc := proxiedRedis(t, q)
		if err := qc.Ping(ctx).Err(); err == nil {
			t.Fatal("PING through a proxy whose target is down succeeded")
		}
		target.Store(n.Addr()) // as a restarted container's new port
		if err := qc.Ping(ctx).Err(); err != nil {
			t.Fatalf("PING after the target moved: %v", err)
		}
	})

	t.Run("CloseWhileHeld", func(t *testing.T) {
		ctx := testCtx(t, 30*time.Second)
		q, err := sandbox.StartProxy(n.Addr)
		if err != nil {
			t.Fatal(err)
		}
		qc := proxiedRedis(t, q)
		if err := qc.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		q.Blackhole(sandbox.Both)
		res := make(chan error, 1)
		go func() { res <- qc.Ping(ctx).Err() }()
		time.Sleep(100 * time.Millisecond)
		closed := make(chan error, 1)
		go func() { closed <- q.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Close hung with bytes held")
		}
		if err := <-res; err == nil {
			t.Fatal("PING through a closed proxy succeeded")
		}
		if err := q.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
}

// refused checks that a new connection to addr is reset before any byte
// passes, and that the port is still the proxy's (a closed port could be
// taken by another socket).
func refused(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	switch {
	case errors.Is(err, syscall.ECONNRESET):
		// The proxy's reset arrived before the dialler read the socket's
		// connect status: the connection was accepted and reset at once.
	case err != nil:
		return fmt.Errorf("dial while refusing: %v, want a connection reset at once", err)
	default:
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = conn.Write([]byte("PING\r\n"))
		if _, err := conn.Read(make([]byte, 16)); !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read while refusing: %v, want a reset", err)
		}
	}
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		return fmt.Errorf("the refusing proxy's port %s is free for others", addr)
	}
	return nil
}

// A connection accepted before Reset, whose target was still being
// dialled, is reset too: it must not get through once the dial completes.
func TestProxyResetDuringDial(t *testing.T) {
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }() // echo
		}
	}()
	asked, release := make(chan struct{}), make(chan struct{})
	p := sandbox.StartProxyT(t, func() string {
		close(asked)
		<-release // the dial is in progress while the test resets
		return srv.Addr().String()
	})
	conn, err := net.DialTimeout("tcp", p.Addr(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	<-asked
	p.Reset()
	close(release)
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	_, _ = conn.Write([]byte("ping"))
	if n, err := conn.Read(make([]byte, 4)); err == nil {
		t.Fatalf("read %d echoed bytes through a connection reset during its dial", n)
	}
}
