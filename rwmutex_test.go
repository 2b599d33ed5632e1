package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/memlock"
)

func TestRWMutexUnsupported(t *testing.T) {
	d, _ := memlock.NewStore().NewDriver(nil)
	// memlock declaring no read-write locks, as a store without them does.
	l := distlock.New(capsDriver{d, func(c *backend.Capabilities) { c.RW = "" }})
	defer l.Close()
	_, err := l.RWMutex("k")
	if !errors.Is(err, distlock.ErrUnsupported) || !strings.Contains(err.Error(), "mem backend") {
		t.Errorf("RWMutex on a driver that declares no read-write locks: %v, want ErrUnsupported naming the backend", err)
	}
	if _, err := l.RWMutex(""); !errors.Is(err, distlock.ErrInvalidKey) {
		t.Errorf("RWMutex(\"\"): %v, want ErrInvalidKey", err)
	}
}

// batchOnlyMutex is memlock with a BatchRefresher that refuses every lock
// but the mutex's, as redislock's does: the watchdog must renew read-write
// leases one by one.
type batchOnlyMutex struct {
	*memlock.Driver
	batched atomic.Int32
}

func (d *batchOnlyMutex) Capabilities() backend.Capabilities {
	c := d.Driver.Capabilities()
	c.BatchRefresh = true
	return c
}

func (d *batchOnlyMutex) RefreshAll(ctx context.Context, locks []backend.Lock, ttls []time.Duration) []error {
	errs := make([]error, len(locks))
	for i, l := range locks {
		if strings.Contains(fmt.Sprintf("%T", l), "rwLock") {
			errs[i] = errors.New("not a mutex lock")
			continue
		}
		d.batched.Add(1)
		errs[i] = l.Refresh(ctx, ttls[i])
	}
	return errs
}

func TestRWLeasesRenewedBesideBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, _ := memlock.NewStore().NewDriver(nil)
		bd := &batchOnlyMutex{Driver: d}
		l := distlock.New(bd, distlock.WithDefaultTTL(150*time.Millisecond))
		defer l.Close()
		ctx := context.Background()
		m, err := l.RWMutex("rw")
		if err != nil {
			t.Fatal(err)
		}
		var leases []*distlock.Lease
		for _, k := range []string{"a", "b"} {
			le, err := l.Acquire(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, le)
		}
		r, err := m.RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m2, _ := l.RWMutex("rw2")
		w, err := m2.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, r, w)
		time.Sleep(600 * time.Millisecond) // four TTLs: renewed several times
		for _, le := range leases {
			if err := le.Err(); err != nil {
				t.Errorf("lease on %q: %v", le.Key(), err)
			}
		}
		if bd.batched.Load() == 0 {
			t.Error("the mutex leases were never renewed through RefreshAll")
		}
	})
}

// TestRWUpgradeWhileReading: an owner whose read is still waiting is as
// much a reader as one that holds: its write is refused at once, not
// queued behind its own read.
func TestRWUpgradeWhileReading(t *testing.T) {
	s := memlock.NewStore()
	da, _ := s.NewDriver(nil)
	db, _ := s.NewDriver(nil)
	a, b := distlock.New(da), distlock.New(db)
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ma, _ := a.RWMutex("k")
	mb, _ := b.RWMutex("k")
	w, err := ma.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owner := distlock.WithOwner("reader-1")
	read := make(chan error, 1)
	go func() {
		r, err := mb.RLock(ctx, owner)
		if err == nil {
			err = r.Release(ctx)
		}
		read <- err
	}()
	time.Sleep(50 * time.Millisecond) // the read waits behind the writer
	start := time.Now()
	if _, err := mb.Lock(ctx, owner); !errors.Is(err, distlock.ErrUpgrade) {
		t.Errorf("Lock by an owner whose RLock waits: %v, want ErrUpgrade", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the refusal took %v", took)
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Errorf("the waiting read: %v", err)
	}
}
