package backend

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseURL(t *testing.T) {
	u, err := ParseURL("redis://alice:p%40ss@h1:6379,h2,[::1]:7000/3?mode=redlock&ttl=5s")
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "redis" || !slices.Equal(u.Hosts, []string{"h1:6379", "h2", "[::1]:7000"}) || u.Path != "/3" {
		t.Errorf("parsed %+v", u)
	}
	if pw, _ := u.Password(); pw != "p@ss" || u.Username() != "alice" {
		t.Errorf("userinfo %q %q", u.Username(), pw)
	}
	if got := u.HostsWithDefaultPort(6379); !slices.Equal(got, []string{"h1:6379", "h2:6379", "[::1]:7000"}) {
		t.Errorf("HostsWithDefaultPort = %q", got)
	}
	if r := u.Redacted(); strings.Contains(r, "p@ss") || strings.Contains(r, "p%40ss") || !strings.Contains(r, "alice:xxxxx@") {
		t.Errorf("Redacted = %q", r)
	}
	if m := u.Query.Enum("mode", "single", "single", "redlock"); m != "redlock" {
		t.Errorf("mode = %q", m)
	}
	if d := u.Query.Duration("ttl", 0); d != 5*time.Second {
		t.Errorf("ttl = %v", d)
	}
	if err := u.Query.Err(); err != nil {
		t.Errorf("Err = %v", err)
	}
}

func TestParseURLErrors(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{"h1:6379", "has no scheme"},
		{"redis:/host", "the '//' before the host is missing"},
		{"redis:host:6379", "has no scheme"},
		{"redis://h1,,h2", "empty host"},
		{"redis://h1:0", `port "0"`},
		{"redis://h1:abc", `port "abc"`},
		{"redis://h1:", `port ""`},
		{"redis://[::1", "missing ']'"},
		{"redis://u:secret@h1:x", `port "x"`},
		{"redis://u:secret@h1/%zz", "invalid URL escape"},
		{"redis://h1/#frag", "fragments"},
		{"re dis://h1", "not valid"},
	} {
		_, err := ParseURL(tc.raw)
		if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseURL(%q) = %v, want ErrInvalidConfig mentioning %q", tc.raw, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseURL(%q) leaked the password: %v", tc.raw, err)
		}
	}
}

func TestParamsReportsEverything(t *testing.T) {
	u, err := ParseURL("x://h?a=1&b=nope&c=2&c=3&d=-5s&e=maybe&zz=1&yy=2")
	if err != nil {
		t.Fatal(err)
	}
	u.Query.Int("a", 0, 0, 10)
	u.Query.Int("b", 0, 0, 10)
	u.Query.String("c", "")
	u.Query.Duration("d", 0)
	u.Query.Bool("e", false)
	err = u.Query.Err()
	for _, want := range []string{`b="nope": want an integer from 0 to 10`, `"c" given 2 times`, `d="-5s"`, `e="maybe"`, "unknown parameter(s): yy, zz"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Err() = %v, want it to mention %q", err, want)
		}
	}
}

func TestRegistry(t *testing.T) {
	open := func(ctx context.Context, u *URL) (Driver, error) { return nil, nil }
	Register("test-scheme", open)
	if _, err := Lookup("test-scheme"); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(Schemes(), "test-scheme") || !slices.IsSorted(Schemes()) {
		t.Errorf("Schemes() = %q", Schemes())
	}
	mustPanic(t, "duplicate", func() { Register("test-scheme", open) })
	mustPanic(t, "invalid", func() { Register("Bad Scheme", open) })
	mustPanic(t, "nil opener", func() { Register("other", nil) })
	_, err := Lookup("zk")
	if err == nil || !strings.Contains(err.Error(), "test-scheme") || !strings.Contains(err.Error(), "distlock/zklock") {
		t.Errorf("Lookup(zk) = %v, want the registered list and the import hint", err)
	}
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", what)
		}
	}()
	f()
}

// TestPasswordNeverEchoed: a password holding '/', '?', '#', '@' or a bad
// escape, or a secret given as a query parameter, appears in no error and
// no Redacted form (issue 12, item 11).
func TestPasswordNeverEchoed(t *testing.T) {
	for _, tc := range []struct{ raw, secret string }{
		{"mysql://root:s3cr/et99@127.0.0.1:1/db", "s3cr"},
		{"mysql://root:s3cr?et99@127.0.0.1:1/db", "s3cr"},
		{"mysql://root:s3cr#et99@127.0.0.1:1/db", "s3cr"},
		{"redis://u:1234/5678@h:6379/0", "1234"},
		{"redis://u:1234?5678@h:6379/0", "1234"},
		{"redis://u:12/34@h/5678", "12/34"},
		{"etcd://u:ab%zzcd@h/locks", "%zz"},
		{"zk://u:se:cr@et@h/locks", "se:cr@et"},
		{"redis://h:6379/0?password=hunter2&ttl=5s", "hunter2"},
		{"redis://h:6379/0?token=hunter2", "hunter2"},
		{"etcds://h/x?auth_token=hunter2&tls_key=/k.pem", "hunter2"},
		{"u:hunter2@h:6379", "hunter2"},
		{"re dis://u:hunter2@h", "hunter2"},
	} {
		u, err := ParseURL(tc.raw)
		var out string
		if err != nil {
			out = err.Error()
		} else {
			out = u.Redacted()
		}
		if strings.Contains(out, tc.secret) {
			t.Errorf("ParseURL(%q): %q shows the secret %q", tc.raw, out, tc.secret)
		}
		if r := RedactURL(tc.raw); strings.Contains(r, tc.secret) {
			t.Errorf("RedactURL(%q) = %q shows the secret %q", tc.raw, r, tc.secret)
		}
	}
	// Harmless parameters and an encoded password still work.
	u, err := ParseURL("etcds://u:a%2Fb%3Fc%23d%40e@h:2379/locks?ttl=5s&tls_key=/k.pem&tls_ca=/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	if pw, _ := u.Password(); pw != "a/b?c#d@e" {
		t.Errorf("password = %q", pw)
	}
	if r := u.Redacted(); r != "etcds://u:xxxxx@h:2379/locks?tls_ca=%2Fca.pem&tls_key=%2Fk.pem&ttl=5s" {
		t.Errorf("Redacted = %q", r)
	}
}

// A bad value read twice (the portable layer and the driver both read
// ttl) is reported once.
func TestParamsErrOnce(t *testing.T) {
	u, err := ParseURL("etcd://h?ttl=-1s")
	if err != nil {
		t.Fatal(err)
	}
	u.Query.Duration("ttl", 0)
	u.Query.Duration("ttl", 0)
	msg := u.Query.Err().Error()
	if n := strings.Count(msg, `ttl="-1s"`); n != 1 {
		t.Errorf("Err() = %q names the bad ttl %d times, want once", msg, n)
	}
}

// What net/url writes for a URL with a scheme and neither host nor path
// ("mem:?ttl=2s" for mem://?ttl=2s) is that URL.
func TestParseURLNetURLForms(t *testing.T) {
	for _, u := range []url.URL{{Scheme: "mem", RawQuery: "ttl=2s"}, {Scheme: "mem"}, {Scheme: "redis", Host: "h1:6379", Path: "/0"}} {
		raw := u.String()
		got, err := ParseURL(raw)
		if err != nil {
			t.Errorf("ParseURL(%q) (net/url's form of %#v): %v", raw, u, err)
			continue
		}
		if got.Scheme != u.Scheme || got.Query.String("ttl", "") != u.Query().Get("ttl") {
			t.Errorf("ParseURL(%q) = %+v", raw, got)
		}
	}
}
