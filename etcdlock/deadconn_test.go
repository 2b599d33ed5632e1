package etcdlock_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

// freezer is a TCP forwarder whose freeze stops every connection made so
// far from carrying bytes (in both directions, nothing closed: a path that
// died without a reset, as when a NAT or a firewall drops its state), while
// connections made later work.
type freezer struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns []*frozenLink
	wg    sync.WaitGroup
}

type frozenLink struct {
	a, b   net.Conn
	frozen chan struct{}
	once   sync.Once
}

func startFreezer(t *testing.T, target string) *freezer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, target: target}
	f.wg.Go(f.accept)
	t.Cleanup(f.close)
	return f
}

func (f *freezer) accept() {
	for {
		a, err := f.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", f.target)
		if err != nil {
			a.Close()
			continue
		}
		l := &frozenLink{a: a, b: b, frozen: make(chan struct{})}
		f.mu.Lock()
		f.conns = append(f.conns, l)
		f.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			buf := make([]byte, 32<<10)
			for {
				n, err := src.Read(buf)
				select {
				case <-l.frozen:
					// Dead path: bytes go nowhere, and nothing is closed
					// until the freezer is.
					if err == nil {
						continue
					}
					return
				default:
				}
				if n > 0 {
					if _, werr := dst.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					if err == io.EOF {
						_ = dst.(*net.TCPConn).CloseWrite()
					}
					return
				}
			}
		}
		f.wg.Go(func() { pipe(b, a) })
		f.wg.Go(func() { pipe(a, b) })
	}
}

func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.conns {
		l.once.Do(func() { close(l.frozen) })
	}
}

func (f *freezer) close() {
	_ = f.ln.Close()
	f.mu.Lock()
	for _, l := range f.conns {
		l.a.Close()
		l.b.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// TestOpenSurvivesDeadConnection: after the connection of a driver opened
// by URL dies without a reset (its path drops everything, nothing is
// closed), the client notices by gRPC keepalive pings, dials again, and
// the Locker acquires again; the lease held across it ends at its deadline
// meanwhile. Without keepalive (clientv3's default) the client keeps
// sending on the dead connection until the kernel gives up on it (about
// 15 min on Linux), and every acquisition fails until then.
func TestOpenSurvivesDeadConnection(t *testing.T) {
	c := startCluster(t, 1)
	f := startFreezer(t, c.g.Addrs()[0])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := distlock.Open(ctx, "etcd://"+f.ln.Addr().String()+"/deadconn/?ttl=2s")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	le, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	f.freeze()
	frozen := time.Now()
	<-le.Done()
	t.Logf("lease ended %v after the connection died: %v", time.Since(frozen).Round(time.Millisecond), le.Err())
	actx, acancel := context.WithTimeout(ctx, time.Minute)
	defer acancel()
	le2, err := l.Acquire(actx, "k2")
	if err != nil {
		t.Fatalf("acquire %v after the connection died: %v", time.Since(frozen).Round(time.Millisecond), err)
	}
	t.Logf("acquired again %v after the connection died", time.Since(frozen).Round(time.Millisecond))
	_ = le2.Release(ctx)
}

// userDriver starts a one-member cluster and returns a harness over it
// with prefix (closed when t ends), a context bounded by a minute, and a
// driver over a user's client (NewUserDriver).
func userDriver(t *testing.T, prefix string) (*harness, context.Context, backend.Driver) {
	t.Helper()
	c := startCluster(t, 1)
	h := newHarness(c, prefix)
	t.Cleanup(func() { _ = h.Close() })
	ctx := ctxT(t, time.Minute)
	d, err := h.NewUserDriver(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return h, ctx, d
}

// TestUserClientClosedUnderLocker: the service closes its own client while
// a Locker over it holds a lock. The driver's lease is not revoked, so it
// expires on the server only after the lease's deadline: the holder's
// lease ends before another client is granted the lock.
func TestUserClientClosedUnderLocker(t *testing.T) {
	h, ctx, d := userDriver(t, "userclosed/")
	l := distlock.New(d)
	defer l.Close()
	le, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	other, err := h.NewDriver(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lb := distlock.New(other)
	defer lb.Close()
	if err := h.Kill(ctx, d); err != nil { // closes the user's client
		t.Fatal(err)
	}
	closed := time.Now()
	rival, err := lb.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	defer func() { _ = rival.Release(ctx) }()
	select {
	case <-le.Done():
	default:
		t.Fatalf("another client was granted the lock %v after the holder's client was closed, while its lease is still %v", granted.Sub(closed).Round(time.Millisecond), le.State())
	}
	t.Logf("rival granted %v after the close; the holder's lease had ended (%v)", granted.Sub(closed).Round(time.Millisecond), le.Err())
}

// TestUserClientCloseDuringStall: Close of a driver over a user's client
// whose path is black-holed, with a lock held and a refresh given up on,
// returns at once: every etcd call of the driver ends with its ctx, which
// Close ends (the lease is not revoked while a lock is held on it).
func TestUserClientCloseDuringStall(t *testing.T) {
	h, ctx, d := userDriver(t, "userstall/")
	g, err := d.TryAcquire(ctx, backend.Request{Key: "k", Owner: "o", TTL: testTTL})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Partition(ctx, d); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Heal(ctx, d) }()
	short, stop := context.WithTimeout(ctx, 100*time.Millisecond)
	defer stop()
	if err := g.Lock.Refresh(short, testTTL); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Refresh over a stalled path = %v, want its ctx's deadline", err)
	}
	start := time.Now()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close took %v with the path stalled", took)
	} else {
		t.Logf("Close took %v with the path stalled", took)
	}
}
