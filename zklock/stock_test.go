package zklock

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sandbox"
)

// TestCrashRecoveryStockTick measures, against a ZooKeeper with the stock
// tickTime (2000 ms), how long a waiter needs to get a lock whose holder's
// connections were cut for good (as if its process had died: no
// closeSession reaches the server), for distlock (URL ttl=4s) and for
// go-zookeeper's zk.Lock (4 s session). It logs the figures, and asserts
// that distlock's holder reported its loss before the waiter held the lock. Slow (about 6 s per
// trial): set DISTLOCK_ZK_STOCK=1.
func TestCrashRecoveryStockTick(t *testing.T) {
	if os.Getenv("DISTLOCK_ZK_STOCK") == "" {
		t.Skip("DISTLOCK_ZK_STOCK not set (slow: about a minute)")
	}
	// Stock: Debian's tickTime=2000 and default session bounds (4 to 40 s).
	// The harness's servers tick every 250 ms, which hides how ZooKeeper's
	// expiry buckets round a session's end (docs/zookeeper.md, "Crash
	// recovery").
	addr := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.ZooKeeper, Stock: true}).Addrs()[0]
	const ttl = 4 * time.Second
	const trials = 4
	ctx := context.Background()
	newPath := func() *netPath {
		p, err := sandbox.StartProxy(func() string { return addr })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		return &netPath{proxies: map[string]*sandbox.Proxy{addr: p}}
	}
	report := func(name string, rs []time.Duration) {
		slices.Sort(rs)
		t.Logf("%s: recovery %v (min %v, max %v)", name, rs, rs[0], rs[len(rs)-1])
	}

	var dl []time.Duration
	for i := range trials {
		key := fmt.Sprintf("stock-%d-%s", i, newGUID()[:8])
		np := newPath()
		holder, err := dialDriver(ctx, urlConfig{hosts: []string{addr},
			dial: dialConfig{timeout: ttl, connectTimeout: 30 * time.Second, dialer: np.dial}, opts: Options{Base: defaultBase}})
		if err != nil {
			t.Fatal(err)
		}
		hl := distlock.New(holder)
		if i == 0 {
			t.Logf("distlock asked for a %v session, granted %v", ttl, holder.timeout())
		}
		hle, err := hl.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		lostAt := make(chan time.Time, 1)
		go func() {
			<-hle.Done()
			lostAt <- time.Now()
		}()
		waiterD, err := dialDriver(ctx, urlConfig{hosts: []string{addr},
			dial: dialConfig{timeout: ttl, connectTimeout: 30 * time.Second}, opts: Options{Base: defaultBase}})
		if err != nil {
			t.Fatal(err)
		}
		wl := distlock.New(waiterD)
		killed := time.Now()
		np.cut(true)
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		le, err := wl.Acquire(wctx, key)
		got := time.Now()
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		dl = append(dl, got.Sub(killed))
		select {
		case at := <-lostAt:
			if !at.Before(got) {
				t.Errorf("the holder reported its loss %v after the waiter held the lock", at.Sub(got))
			}
		default:
			t.Errorf("the waiter holds the lock and the holder still believes it does")
		}
		_ = le.Release(ctx)
		_ = wl.Close()
		go func() { _ = hl.Close() }()
	}
	report("distlock", dl)

	var zl []time.Duration
	for i := range trials {
		key := fmt.Sprintf("/stock-zklock-%d-%s", i, newGUID()[:8])
		np := newPath()
		hc, _, err := zk.Connect([]string{addr}, ttl, zk.WithDialer(np.dial), zk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		if err := zk.NewLock(hc, key, zk.WorldACL(zk.PermAll)).Lock(); err != nil {
			t.Fatal(err)
		}
		wc, _, err := zk.Connect([]string{addr}, ttl, zk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		np.cut(true)
		l := zk.NewLock(wc, key, zk.WorldACL(zk.PermAll))
		if err := l.Lock(); err != nil {
			t.Fatal(err)
		}
		zl = append(zl, time.Since(killed))
		_ = l.Unlock()
		wc.Close()
		go hc.Close()
	}
	report("zk.Lock", zl)
}
