package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"testing"
	"time"
)

// status --json prints the same fields, meaning the same, for a lock, a
// semaphore and a read-write lock, held or free: held is a boolean
// everywhere, the holders a list (empty when free) of owner, mode, token,
// TTL and deadline, and permits_held is a semaphore's alone. (A reader's
// token is the last writer's: 0 before any.)
func TestStatusSameFieldsEveryPrimitive(t *testing.T) {
	const url = "mem://same-fields"
	l := openMem(t, url)
	ctx := context.Background()
	if _, err := l.TryAcquire(ctx, "lock"); err != nil {
		t.Fatal(err)
	}
	sem, err := l.Semaphore("sem", 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sem.TryAcquire(ctx); err != nil {
		t.Fatal(err)
	}
	rw, err := l.RWMutex("rw")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.TryRLock(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := l.RWMutex("rw-w")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	o := queryOpts{url: url, timeout: 10 * time.Second, asJSON: true}
	type query func(context.Context, io.Writer, queryOpts, string) error
	base := []string{"backend", "key", "kind", "held", "token", "holders", "waiters"}
	for _, tc := range []struct {
		q          query
		key, kind  string
		mode       string // the holder's; "" when free
		extraField string
	}{
		{status, "lock", "lock", "exclusive", ""},
		{status, "free", "lock", "", ""},
		{semaphoreStatus, "sem", "semaphore", "permits", "permits_held"},
		{semaphoreStatus, "sem-free", "semaphore", "", "permits_held"},
		{rwStatus, "rw", "rw", "read", ""},
		{rwStatus, "rw-w", "rw", "write", ""},
		{rwStatus, "rw-free", "rw", "", ""},
	} {
		var out bytes.Buffer
		err := tc.q(ctx, &out, o, tc.key)
		if code := classify(err); code != map[bool]int{true: ExitOK, false: ExitFree}[tc.mode != ""] {
			t.Errorf("%s %s: exit %d (%v)", tc.kind, tc.key, code, err)
		}
		var fields map[string]any
		if err := json.Unmarshal(out.Bytes(), &fields); err != nil {
			t.Fatalf("%s %s: %q: %v", tc.kind, tc.key, out.String(), err)
		}
		want := slices.Clone(base)
		if tc.extraField != "" {
			want = append(want, tc.extraField)
		}
		slices.Sort(want)
		if got := slices.Sorted(maps.Keys(fields)); !slices.Equal(got, want) {
			t.Errorf("%s %s: fields %v, want %v", tc.kind, tc.key, got, want)
		}
		var st stateJSON
		_ = json.Unmarshal(out.Bytes(), &st)
		if st.Kind != tc.kind || st.Held != (tc.mode != "") || st.Waiters < -1 {
			t.Errorf("%s %s: %s", tc.kind, tc.key, out.String())
		}
		if tc.mode == "" {
			if len(st.Holders) != 0 {
				t.Errorf("%s %s is free but lists holders: %s", tc.kind, tc.key, out.String())
			}
			continue
		}
		h := st.holder()
		dl, err := time.Parse(time.RFC3339Nano, h.Deadline)
		if len(st.Holders) != 1 || h.Mode != tc.mode || h.Owner == "" || (h.Token == 0 && tc.mode != "read") || st.Token != h.Token ||
			h.TTL <= 0 || err != nil || time.Until(dl) <= 0 || time.Until(dl) > 31*time.Second {
			t.Errorf("%s %s: holder %+v (deadline %v), token %d", tc.kind, tc.key, h, err, st.Token)
		}
		if tc.kind == "semaphore" && (h.Permits != 1 || fields["permits_held"] != 1.0) {
			t.Errorf("semaphore: %s, want one permit held", out.String())
		}
	}
}
