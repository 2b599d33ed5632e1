package zklock

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sandbox"
)

// startStockZooKeeper starts a standalone ZooKeeper from Debian's jar with
// the stock tickTime of 2000 ms and default session limits (2 to 20 ticks),
// on a free loopback port and a temporary data directory, and stops it when
// the test ends. The sandbox's servers tick every 250 ms, which hides how
// ZooKeeper's expiry buckets round a session's end (see docs/zookeeper.md,
// "Crash recovery").
func startStockZooKeeper(t *testing.T) string {
	t.Helper()
	const jar = "/usr/share/java/zookeeper.jar"
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skip("no java")
	}
	if _, err := os.Stat(jar); err != nil {
		t.Skip("no ZooKeeper jar")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "zoo.cfg")
	conf := fmt.Sprintf("tickTime=2000\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=srvr\n",
		filepath.Join(dir, "data"), port)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cp := jar
	if _, err := os.Stat("/usr/share/java/slf4j-simple.jar"); err == nil {
		cp += ":/usr/share/java/slf4j-simple.jar"
	}
	cmd := exec.Command(java, "-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-cp", cp,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg)
	log, err := os.Create(filepath.Join(dir, "zk.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = log.Close()
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_, _ = c.Write([]byte("srvr"))
			buf := make([]byte, 64)
			n, _ := c.Read(buf)
			_ = c.Close()
			if n > 0 {
				return addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("stock ZooKeeper did not start on %s", addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCrashRecoveryStockTick measures, against a ZooKeeper with the stock
// tickTime (2000 ms), how long a waiter needs to get a lock whose holder's
// connections were cut for good (as if its process had died: no
// closeSession reaches the server), for distlock (URL ttl=4s) and for
// go-zookeeper's zk.Lock (4 s session). It asserts only the bound that
// ZooKeeper's expiry guarantees, and logs the figures. Slow (about 6 s per
// trial): set DISTLOCK_ZK_STOCK=1.
func TestCrashRecoveryStockTick(t *testing.T) {
	if os.Getenv("DISTLOCK_ZK_STOCK") == "" {
		t.Skip("DISTLOCK_ZK_STOCK not set (slow: about a minute)")
	}
	addr := startStockZooKeeper(t)
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
		if _, err := hl.Acquire(ctx, key); err != nil {
			t.Fatal(err)
		}
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
