package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/etcdlock"
)

// oneByOne hides the driver's TryAcquireMulti: the Locker takes a
// multi-lock's keys one by one, as it did before the one-step path.
type oneByOne struct {
	backend.Driver
	backend.Waiter
}

// TestRoundTripsMultiLock counts the RPCs of TryAcquireAll of three free
// keys once the driver's lease exists: one Txn (every key's comparison
// and put), where the keys taken one by one cost a Txn each.
func TestRoundTripsMultiLock(t *testing.T) {
	cl := startCluster(t, 1)
	for _, tc := range []struct {
		name string
		want int
	}{{"one-step", 1}, {"one-by-one", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rc := &rpcCounter{}
			d := cl.driverVia(t, &etcdlock.Options{Prefix: "rt-multi/"}, grpc.WithChainUnaryInterceptor(rc.intercept))
			var bd backend.Driver = d
			if tc.want > 1 {
				bd = oneByOne{d, d}
			}
			l := distlock.New(bd)
			defer l.Close()
			keys := []string{tc.name + "-c", tc.name + "-a", tc.name + "-b"}
			for round := range 2 { // the first grants the lease
				rc.take()
				m, err := l.TryAcquireAll(ctx, keys)
				if err != nil {
					t.Fatal(err)
				}
				calls := rc.take()
				if err := m.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if round == 1 && (len(calls) != tc.want || slices.ContainsFunc(calls, func(c string) bool { return c != "Txn" })) {
					t.Errorf("TryAcquireAll of 3 free keys sent %v, want %d Txn and nothing else", calls, tc.want)
				}
			}
		})
	}
}

// TestMultiLockTxn: a TryAcquireMulti that finds a key held names it and
// puts nothing (the range of every other key stays empty), and a set
// larger than one transaction may take is refused with ErrUnsupported
// before anything is sent.
func TestMultiLockTxn(t *testing.T) {
	cl := startCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := cl.client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	newDriver := func() *etcdlock.Driver {
		d, err := etcdlock.New(c, &etcdlock.Options{Prefix: "txn-multi/"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}
	a, b := newDriver(), newDriver()
	req := func(key string) backend.Request {
		return backend.Request{Key: key, Owner: "owner-0123456789abcdef", TTL: 10 * time.Second}
	}
	g, err := a.TryAcquire(ctx, req("k2"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.TryAcquireMulti(ctx, []backend.Request{req("k1"), req("k2"), req("k3")})
	var na *backend.NotAcquiredError
	if !errors.As(err, &na) || na.Key != "k2" {
		t.Errorf("TryAcquireMulti with k2 held: %v, want a NotAcquiredError naming k2", err)
	}
	for _, k := range []string{"k1", "k3"} {
		resp, err := c.Get(ctx, b.KeyRange(k), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count != 0 {
			t.Errorf("a refused TryAcquireMulti left %d keys in %s's range", resp.Count, k)
		}
	}
	if err := g.Lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// MaxMultiKeys keys fit in one transaction under etcd's default
	// --max-txn-ops (two comparisons a key).
	var most []backend.Request
	for i := range etcdlock.MaxMultiKeys {
		most = append(most, req(fmt.Sprintf("most-%03d", i)))
	}
	gs, err := b.TryAcquireMulti(ctx, most)
	if err != nil {
		t.Fatalf("TryAcquireMulti of %d keys: %v", len(most), err)
	}
	for _, g := range gs {
		if err := g.Lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var many []backend.Request
	for i := range etcdlock.MaxMultiKeys + 1 {
		many = append(many, req(fmt.Sprintf("many-%03d", i)))
	}
	if _, err := b.TryAcquireMulti(ctx, many); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("TryAcquireMulti of %d keys: %v, want ErrUnsupported", len(many), err)
	}
}
