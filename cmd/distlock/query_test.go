package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// openMem opens a second client of url's in-process store.
func openMem(t *testing.T, url string) *distlock.Locker {
	t.Helper()
	l, err := distlock.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestStatusExitCodes: status exits 0 for a held lock and 3 for a free
// one, and --json prints one line either way.
func TestStatusExitCodes(t *testing.T) {
	const url = "mem://status-codes"
	le, err := openMem(t, url).TryAcquire(context.Background(), "held")
	if err != nil {
		t.Fatal(err)
	}
	o := queryOpts{url: url, timeout: 10 * time.Second, asJSON: true}
	for _, tc := range []struct {
		key  string
		code int
	}{{"held", ExitOK}, {"free", ExitFree}} {
		var out bytes.Buffer
		err := status(context.Background(), &out, o, tc.key)
		if code := classify(err); code != tc.code {
			t.Errorf("status of the %s key: %v (exit %d), want exit %d", tc.key, err, code, tc.code)
		}
		var st statusJSON
		if strings.Count(out.String(), "\n") != 1 || json.Unmarshal(out.Bytes(), &st) != nil {
			t.Fatalf("status --json printed %q, want one line of JSON", out.String())
		}
		if st.Key != tc.key || st.Held != (tc.key == "held") || (st.Held && (st.Owner != le.Owner() || st.Token != le.Token())) {
			t.Errorf("status --json of the %s key = %+v", tc.key, st)
		}
	}
}
