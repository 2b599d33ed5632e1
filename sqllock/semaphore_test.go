package sqllock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock"
)

// semLarge: a grant of more permits than one statement creates slots for
// (slot creation in chunks), then acquirers with a smaller and a larger
// limit: the smaller one is refused although slots below its limit are
// free, because the holds above it count (the probe of held slots); the
// larger one is admitted.
func semLarge(t *testing.T, d *sqllock.Driver) {
	l := distlock.New(d, distlock.WithDefaultTTL(30*time.Second))
	t.Cleanup(func() { _ = l.Close() })
	key := uniqueKey("sem-large")
	big, err := l.Semaphore(key, 2500)
	if err != nil {
		t.Fatal(err)
	}
	le, err := big.TryAcquireN(ctxFor(t, 30*time.Second), 2100)
	if err != nil {
		t.Fatalf("TryAcquireN(2100) of 2500: %v", err)
	}
	defer release(t, le)
	small, err := l.Semaphore(key, 2200)
	if err != nil {
		t.Fatal(err)
	}
	if le2, err := small.TryAcquireN(ctxFor(t, 10*time.Second), 101); !errors.Is(err, distlock.ErrNotAcquired) {
		if err == nil {
			release(t, le2)
		}
		t.Fatalf("TryAcquireN(101) of 2200 with 2100 held: %v, want ErrNotAcquired", err)
	}
	le3, err := small.TryAcquireN(ctxFor(t, 10*time.Second), 100)
	if err != nil {
		t.Fatalf("TryAcquireN(100) of 2200 with 2100 held: %v", err)
	}
	defer release(t, le3)
	if le4, err := small.TryAcquire(ctxFor(t, 10*time.Second)); !errors.Is(err, distlock.ErrNotAcquired) {
		if err == nil {
			release(t, le4)
		}
		t.Fatalf("TryAcquire of 2200 with 2200 held: %v, want ErrNotAcquired", err)
	}
	le5, err := big.TryAcquireN(ctxFor(t, 10*time.Second), 300)
	if err != nil {
		t.Fatalf("TryAcquireN(300) of 2500 with 2200 held: %v", err)
	}
	release(t, le5)
}

// TestSemaphoreLarge: semLarge in every mode that has semaphores.
func TestSemaphoreLarge(t *testing.T) {
	eachDialect(t, mysqlProc|mysqlBatched|pgRow, func(t *testing.T, d *dialect) {
		dr, _ := d.newDriver(t, d.server(t), sqllock.Options{})
		semLarge(t, dr)
	})
}

// TestSemaphoreCapability: a mode offers semaphores, or says it offers
// none: PostgreSQL's advisory mode has no slot table.
func TestSemaphoreCapability(t *testing.T) {
	eachDialect(t, allRows, func(t *testing.T, d *dialect) {
		dr, _ := d.newDriver(t, d.server(t), sqllock.Options{})
		l := distlock.New(dr)
		t.Cleanup(func() { _ = l.Close() })
		c := dr.Capabilities()
		if d.semaphore {
			if c.Semaphore == "" {
				t.Errorf("Capabilities().Semaphore is empty, want semaphores")
			}
			if _, err := l.Semaphore(uniqueKey("semcap"), 2); err != nil {
				t.Errorf("Semaphore: %v", err)
			}
			return
		}
		if c.Semaphore != "" {
			t.Errorf("Capabilities().Semaphore = %q, want none", c.Semaphore)
		}
		if _, err := l.Semaphore("k", 2); !errors.Is(err, distlock.ErrUnsupported) {
			t.Errorf("Semaphore: %v, want ErrUnsupported", err)
		}
	})
}
