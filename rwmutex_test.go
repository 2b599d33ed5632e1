package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/memlock"
)

func TestRWMutexUnsupported(t *testing.T) {
	d, _ := memlock.NewStore().NewDriver(nil)
	l := distlock.New(noInspect{d}) // forwards Capabilities (rw=notify) but hides RWLocker
	defer l.Close()
	_, err := l.RWMutex("k")
	if !errors.Is(err, distlock.ErrUnsupported) || !strings.Contains(err.Error(), "mem backend") {
		t.Errorf("RWMutex on a driver without RWLocker: %v, want ErrUnsupported naming the backend", err)
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
}
