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
		var st stateJSON
		if strings.Count(out.String(), "\n") != 1 || json.Unmarshal(out.Bytes(), &st) != nil {
			t.Fatalf("status --json printed %q, want one line of JSON", out.String())
		}
		if st.Key != tc.key || st.Held != (tc.key == "held") || (st.Held && (st.holder().Owner != le.Owner() || st.Token != le.Token())) {
			t.Errorf("status --json of the %s key = %+v", tc.key, st)
		}
	}
}

// TestListUnderPrefix: list shows the held locks under --prefix, sorted,
// within --limit, as a table or one JSON line per lock.
func TestListUnderPrefix(t *testing.T) {
	const url = "mem://list-prefix"
	l := openMem(t, url)
	for _, key := range []string{"app/b", "app/a", "other"} {
		if _, err := l.TryAcquire(context.Background(), key); err != nil {
			t.Fatal(err)
		}
	}
	o := queryOpts{url: url, timeout: 10 * time.Second}
	var out bytes.Buffer
	if err := list(context.Background(), &out, o, "app/", 0); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "KEY ") || !strings.HasPrefix(lines[1], "app/a ") || !strings.HasPrefix(lines[2], "app/b ") {
		t.Errorf("list --prefix app/ printed:\n%s", out.String())
	}
	out.Reset()
	o.asJSON = true
	if err := list(context.Background(), &out, o, "", 2); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		var st stateJSON
		if err := json.Unmarshal([]byte(line), &st); err != nil || !st.Held || st.Backend != "mem" {
			t.Errorf("list --json line %q (%v)", line, err)
		}
		keys = append(keys, st.Key)
	}
	if strings.Join(keys, " ") != "app/a app/b" {
		t.Errorf("list --limit 2 listed %q, want app/a and app/b", keys)
	}
}

// TestListBinary: the binary lists nothing for a fresh in-process store.
func TestListBinary(t *testing.T) {
	if out, code := runCLI(t, nil, "list", "--url", "mem://"); code != 0 || strings.TrimSpace(out) != "KEY  OWNER  TOKEN  EXPIRES IN  DEADLINE  WAITING" {
		t.Errorf("list of an empty store: exit %d:\n%s", code, out)
	}
	if out, code := runCLI(t, nil, "list", "--url", "mem://", "--json"); code != 0 || out != "" {
		t.Errorf("list --json of an empty store: exit %d:\n%s", code, out)
	}
}

// holder is the first of s's holders (none: the zero holder).
func (s stateJSON) holder() holderJSON {
	if len(s.Holders) == 0 {
		return holderJSON{}
	}
	return s.Holders[0]
}
