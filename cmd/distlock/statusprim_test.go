package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestStatusSemaphoreAndRW: status --semaphore reports a semaphore's
// grants and the permits held in all, status --rw a read-write lock's
// writer or readers, as JSON, with exit 0 while held and 3 when free.
func TestStatusSemaphoreAndRW(t *testing.T) {
	const url = "mem://status-prim"
	ctx := context.Background()
	l := openMem(t, url)
	o := queryOpts{url: url, timeout: 10 * time.Second, asJSON: true}
	decode := func(t *testing.T, out *bytes.Buffer, v any) {
		t.Helper()
		if strings.Count(out.String(), "\n") != 1 || json.Unmarshal(out.Bytes(), v) != nil {
			t.Fatalf("printed %q, want one line of JSON", out.String())
		}
	}

	s, err := l.Semaphore("s", 4)
	if err != nil {
		t.Fatal(err)
	}
	one, err := s.AcquireN(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := semaphoreStatus(ctx, &out, o, "s"); classify(err) != ExitOK {
		t.Fatalf("status --semaphore of a held semaphore: %v", err)
	}
	var sj stateJSON
	decode(t, &out, &sj)
	if sj.Key != "s" || sj.Kind != "semaphore" || !sj.Held || sj.PermitsHeld == nil || *sj.PermitsHeld != 3 || len(sj.Holders) != 1 || sj.Holders[0].Owner != one.Owner() || sj.Holders[0].Permits != 3 || sj.Holders[0].Token != one.Token() {
		t.Errorf("status --semaphore = %+v, want 3 permits held by %q", sj, one.Owner())
	}
	if err := one.Release(ctx); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := semaphoreStatus(ctx, &out, o, "s"); classify(err) != ExitFree {
		t.Errorf("status --semaphore of a free semaphore: %v (exit %d), want exit %d", err, classify(err), ExitFree)
	}

	m, err := l.RWMutex("rw")
	if err != nil {
		t.Fatal(err)
	}
	w, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := rwStatus(ctx, &out, o, "rw"); classify(err) != ExitOK {
		t.Fatalf("status --rw of a written lock: %v", err)
	}
	var rj stateJSON
	decode(t, &out, &rj)
	if rj.Kind != "rw" || !rj.Held || len(rj.Holders) != 1 || rj.Holders[0].Mode != "write" || rj.Holders[0].Owner != w.Owner() || rj.Holders[0].Token != w.Token() {
		t.Errorf("status --rw = %+v, want the writer %q", rj, w.Owner())
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := m.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := rwStatus(ctx, &out, o, "rw"); classify(err) != ExitOK {
		t.Fatalf("status --rw of a read lock: %v", err)
	}
	rj = stateJSON{}
	decode(t, &out, &rj)
	if len(rj.Holders) != 1 || rj.Holders[0].Mode != "read" || rj.Holders[0].Owner != r.Owner() {
		t.Errorf("status --rw = %+v, want the reader %q", rj, r.Owner())
	}
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := rwStatus(ctx, &out, o, "rw"); classify(err) != ExitFree {
		t.Errorf("status --rw of a free lock: %v (exit %d), want exit %d", err, classify(err), ExitFree)
	}
}
