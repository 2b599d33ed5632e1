package backend

import (
	"context"
	"errors"
	"fmt"
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
	// b, d and e are not SafeParams: their values, hidden by Redacted, are
	// not echoed either (issue 27, item 7).
	for _, want := range []string{`parameter b: want an integer from 0 to 10`, `"c" given 2 times`, `parameter d: want a positive duration`, `parameter e: want true or false`, "unknown parameter(s): yy, zz"} {
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
		hidesSecret(t, tc.raw, tc.secret)
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

// hidesSecret fails t where ParseURL's error or Redacted form of raw, or
// RedactURL's, shows secret; it returns ParseURL's error.
func hidesSecret(t *testing.T, raw, secret string) error {
	t.Helper()
	u, err := ParseURL(raw)
	var out string
	if err != nil {
		out = err.Error()
	} else {
		out = u.Redacted()
	}
	if strings.Contains(out, secret) {
		t.Errorf("ParseURL(%q): %q shows the secret %q", raw, out, secret)
	}
	if r := RedactURL(raw); strings.Contains(r, secret) {
		t.Errorf("RedactURL(%q) = %q shows the secret %q", raw, r, secret)
	}
	return err
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

// TestNotAURLNeverEchoed: input that is not a URL (a libpq keyword DSN, a
// host:port, a scheme without "//") is not echoed, and a password=, pass=
// or pwd= keyword shows in no error, Redacted or RedactURL form (issue 27,
// item 7).
func TestNotAURLNeverEchoed(t *testing.T) {
	for _, tc := range []struct{ raw, secret string }{
		{"host=127.0.0.1 port=25439 user=pgadmin password=PgSecretPw dbname=appdb", "PgSecretPw"},
		{"host=127.0.0.1 password='Pg Secret Pw' dbname=appdb", "Secret"},
		{"user=sa;pwd=PgSecretPw;server=h", "PgSecretPw"},
		{"host=h pass=PgSecretPw", "PgSecretPw"},
		{"host=h sslrootcert=file://x password=PgSecretPw", "PgSecretPw"},
		{"redis:/h password=PgSecretPw", "PgSecretPw"},
		{"mysql://h/db password=PgSecretPw", "PgSecretPw"},
		{"mysql://h/db%20password=PgSecretPw", "PgSecretPw"},
		{"mysql://h/db%20PASSWORD%20=%20PgSecretPw", "PgSecretPw"},
		{"redis://password=PgSecretPw@h/0", "PgSecretPw"},
		{"redis://h1,password=PgSecretPw:12/0", "PgSecretPw"},
		{"redis://h1,password=x:PgSecretPw/0", "PgSecretPw"},
		{"redis://h1 password=PgSecretPw/0", "PgSecretPw"},
	} {
		if err := hidesSecret(t, tc.raw, tc.secret); err != nil && !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("ParseURL(%q) = %v, want ErrInvalidConfig", tc.raw, err)
		}
	}
	// The error still says what is wrong.
	_, err := ParseURL("host=127.0.0.1 port=25439 user=pgadmin password=PgSecretPw dbname=appdb")
	if err == nil || !strings.Contains(err.Error(), "no scheme") || !strings.Contains(err.Error(), "postgres://") {
		t.Errorf("a keyword DSN: %v, want it to say there is no scheme and show the URL form", err)
	}
}

// TestParamErrorsHideWhatRedactedHides: a value Redacted hides is not
// echoed by the error of the parameter it was given to (issue 27, item 7).
func TestParamErrorsHideWhatRedactedHides(t *testing.T) {
	const secret = "Hunter2Secret"
	u, err := ParseURL("x://h?p1=" + secret + "&p2=" + secret + "&p3=" + secret + "&p4=" + secret + "&p5=" + secret)
	if err != nil {
		t.Fatal(err)
	}
	u.Query.Duration("p1", 0)
	u.Query.Int("p2", 0, 0, 1)
	u.Query.Bool("p3", false)
	u.Query.Enum("p4", "a", "a", "b")
	u.Query.FailValue("p5", u.Query.String("p5", ""), "want something else")
	msg := u.Query.Err().Error()
	if strings.Contains(msg, secret) || strings.Contains(u.Redacted(), secret) {
		t.Errorf("Err() = %q, Redacted = %q: the value shows", msg, u.Redacted())
	}
	for _, name := range []string{"p1", "p2", "p3", "p4", "p5"} {
		if !strings.Contains(msg, "parameter "+name+":") {
			t.Errorf("Err() = %q does not name parameter %s", msg, name)
		}
	}
	// A value Redacted shows is named with its parameter.
	u, _ = ParseURL("x://h?ttl=soon&table=a-b")
	u.Query.Duration("ttl", 0)
	u.Query.FailValue("table", u.Query.String("table", ""), "want letters")
	if msg := u.Query.Err().Error(); !strings.Contains(msg, `ttl="soon"`) || !strings.Contains(msg, `table="a-b": want letters`) {
		t.Errorf("Err() = %q, want the safe values shown", msg)
	}
}

// TestDurationBounds: a duration parameter is a positive Go duration of at
// most MaxParamDuration; NaN, infinities, exponents, negative, zero and
// overflowing values are refused, naming the parameter (issue 27, item 6).
func TestDurationBounds(t *testing.T) {
	for _, v := range []string{"NaN", "Inf", "+Inf", "-Inf", "1e3s", "1e309", "-1s", "0", "0s", "-0s", "9999999999h",
		"2562047h", "9223372036854775807ns", "8761h", "", "5", "5 s", "0x10s", "1_000s"} {
		u, err := ParseURL("x://h?read_timeout=" + url.QueryEscape(v))
		if err != nil {
			t.Fatal(err)
		}
		d := u.Query.Duration("read_timeout", time.Second)
		err = u.Query.Err()
		if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "parameter read_timeout") || d != time.Second {
			t.Errorf("read_timeout=%q: %v (got %v), want ErrInvalidConfig naming the parameter", v, err, d)
		}
	}
	for v, want := range map[string]time.Duration{"1ns": 1, "1.5s": 1500 * time.Millisecond, "+2m": 2 * time.Minute, "8760h": MaxParamDuration} {
		u, _ := ParseURL("x://h?read_timeout=" + url.QueryEscape(v))
		if d := u.Query.Duration("read_timeout", time.Second); d != want || u.Query.Err() != nil {
			t.Errorf("read_timeout=%q = %v, %v; want %v", v, d, u.Query.Err(), want)
		}
	}
	u, _ := ParseURL("x://h?session_timeout=50ms&b=25h")
	u.Query.DurationIn("session_timeout", time.Second, 100*time.Millisecond, 24*time.Hour)
	u.Query.DurationIn("b", time.Second, time.Second, 24*time.Hour)
	msg := fmt.Sprint(u.Query.Err())
	if !strings.Contains(msg, `session_timeout="50ms": want from 100ms to 24h`) || !strings.Contains(msg, "parameter b: want from 1s to 24h") {
		t.Errorf("DurationIn: %s", msg)
	}
}
