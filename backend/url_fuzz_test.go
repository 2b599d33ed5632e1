package backend

import (
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode"
)

// outputs is everything ParseURL, the redaction helpers and the readers of
// Params may show of raw: the parse error, or Redacted and the errors of
// every parameter read as each kind of value.
func outputs(raw string) string {
	var b strings.Builder
	u, err := ParseURL(raw)
	if err != nil {
		b.WriteString(err.Error())
	} else {
		b.WriteString(u.Redacted())
		if u.Query != nil {
			// Errors of parameters nobody reads name them, never their values.
			if err := u.Query.Err(); err != nil {
				b.WriteString(err.Error())
			}
		}
		for _, read := range paramReaders {
			u, _ := ParseURL(raw)
			for name := range u.Query.values {
				read(u.Query, name)
			}
			if err := u.Query.Err(); err != nil {
				b.WriteString(err.Error())
			}
		}
	}
	b.WriteString(" ")
	b.WriteString(RedactURL(raw))
	return b.String()
}

// paramReaders read a parameter as each kind of value Params knows.
var paramReaders = []func(p *Params, name string){
	func(p *Params, name string) { p.Duration(name, 0) },
	func(p *Params, name string) { p.DurationIn(name, 0, time.Second, time.Hour) },
	func(p *Params, name string) { p.Int(name, 0, 0, 10) },
	func(p *Params, name string) { p.Bool(name, false) },
	func(p *Params, name string) { p.Enum(name, "a", "a", "b") },
	func(p *Params, name string) { p.FailValue(name, p.String(name, ""), "want something else") },
}

// innocuous returns pass with every letter and digit changed and every
// other character kept: a password that parses (or fails to) as pass does,
// so the outputs for both take the same path and differ only where the
// password itself shows.
func innocuous(pass string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case strings.ContainsRune("abcdefABCDEF", r): // a hex digit stays one
			if r == 'a' || r == 'A' {
				return r + 1
			}
			return r - (r-'A')%32 // 'a' or 'A'
		case unicode.IsLetter(r):
			if r == 'Q' {
				return 'R'
			}
			return 'Q'
		case unicode.IsDigit(r):
			if r == '7' {
				return '8'
			}
			return '7'
		}
		return r
	}, pass)
}

// FuzzParseURL: for every scheme, ParseURL never panics, and no credential
// shows in any error or redacted form: the password of the user info, a
// password=, pass= or pwd= keyword (in a libpq keyword string, which is
// not a URL, or in a URL's host or path) and the value of any query
// parameter Redacted hides, whichever reader of Params refuses it (issue
// 27, item 7). A secret is taken to leak when it appears in the outputs
// for the input but not in those for the same input with an innocuous
// secret (of the same shape) in its place (so a password that is also a
// host name, or a word of the error text, is no leak).
func FuzzParseURL(f *testing.F) {
	for _, s := range []struct{ scheme, user, pass, rest string }{
		{"redis", "u", "s3cr/et", "127.0.0.1:6379/0?ttl=5s"},
		{"rediss", "", "hunter2", "h1:6380,h2/0?tls_ca=/ca.pem"},
		{"mysql", "root", "pa/ss", "127.0.0.1:1/db"},
		{"mysql", "root", "pa?ss", "127.0.0.1:1/db"},
		{"mysql", "root", "pa#ss", "127.0.0.1:1/db"},
		{"zk", "app", "se:cr@et", "h1,h2:2181/locks?acl=creator"},
		{"zks", "app", "t/ls#pw", "h1:2281/locks?tls_ca=/ca.pem&tls_server_name=zk"},
		{"etcd", "root", "ab%zzcd", "h/locks"},
		{"etcds", "root", "1234/5678", "h:2379/x?dial_timeout=1s"},
		{"mem", "u", "p@ss", "name?wait=queue"},
		{"redis", "u", "x%2Fy", "[::1]:7000/1?password=zzz"},
		// Issue 27, item 7: libpq keyword strings, keywords in a host or
		// path, secrets given to parameters that refuse them.
		{"host=127.0.0.1 port=25439 user=pgadmin", "dbname", "PgSecretPw", "dbname=appdb"},
		{"postgres", "pgadmin", "Pg Secret'Pw", "127.0.0.1/appdb?sslmode=verify-full"},
		{"user=sa;pwd", "server", "PgSecretPw", "h;database=x"},
		{"mysql", "sa", "PgSecretPw", "h/db%20password=x"},
		{"redis", "token", "1e309", "h/0?ttl=NaN&read_timeout=9999999999h"},
		{"redis", "secret_level", "-Inf", "h/0?wait_replicas=1e3"},
		{"zk", "password=", "2562047h", "h1/locks?session_timeout=-0s"},
		{"etcd", "token", "Hunter2Secret", "h/x?ttl=1e3s&dial_timeout=0x10s"},
	} {
		f.Add(s.scheme, s.user, s.pass, s.rest)
	}
	f.Fuzz(func(t *testing.T, scheme, user, pass, rest string) {
		raw := scheme + "://" + user + ":" + pass + "@" + rest
		_ = outputs(pass) // must not panic
		_ = outputs(rest)
		if len(pass) < 4 || strings.Contains("xxxxx", pass) {
			_ = outputs(raw)
			return
		}
		other := innocuous(pass)
		if other == pass {
			_ = outputs(raw)
			return // no letter or digit to change: nothing to compare with
		}
		sep := "?"
		if strings.Contains(rest, "?") {
			sep = "&"
		}
		forms := []func(secret string) string{
			// The password of the user info.
			func(p string) string { return scheme + "://" + user + ":" + p + "@" + rest },
			// A libpq keyword string (not a URL), a keyword in a URL.
			func(p string) string { return scheme + " " + user + " password=" + p + " " + rest },
			func(p string) string { return scheme + "://" + rest + " pwd=" + p },
			func(p string) string { return scheme + "://" + user + " pass = '" + p + "'@" + rest },
			// A query value Redacted hides, under the fuzzer's name.
			func(p string) string {
				return scheme + "://" + rest + sep + url.QueryEscape(user) + "=" + url.QueryEscape(p)
			},
			func(p string) string { return scheme + "://" + rest + sep + "token=" + url.QueryEscape(p) },
		}
		for i, form := range forms {
			in := form(pass)
			out := outputs(in)
			if i == 4 && safeParam(user) {
				continue // a value Redacted shows
			}
			if strings.Contains(out, pass) && !strings.Contains(outputs(form(other)), pass) {
				t.Errorf("input %q: the secret %q shows in %q", in, pass, out)
			}
		}
	})
}
