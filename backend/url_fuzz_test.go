package backend

import (
	"strings"
	"testing"
	"unicode"
)

// outputs is everything ParseURL and the redaction helpers may show of raw.
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
	}
	b.WriteString(" ")
	b.WriteString(RedactURL(raw))
	return b.String()
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

// FuzzParseURL: for every scheme, ParseURL never panics, and the password
// shows in no error and no redacted form. A password is taken to leak when
// it appears in the outputs for the URL but not in those for the same URL
// with an innocuous password (of the same shape) in its place (so a password that is also a
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
	} {
		f.Add(s.scheme, s.user, s.pass, s.rest)
	}
	f.Fuzz(func(t *testing.T, scheme, user, pass, rest string) {
		raw := scheme + "://" + user + ":" + pass + "@" + rest
		out := outputs(raw) // must not panic
		_ = outputs(pass)
		_ = outputs(rest)
		if len(pass) < 4 || strings.Contains("xxxxx", pass) {
			return
		}
		other := innocuous(pass)
		if other == pass {
			return // no letter or digit to change: nothing to compare with
		}
		alt := outputs(scheme + "://" + user + ":" + other + "@" + rest)
		if strings.Contains(out, pass) && !strings.Contains(alt, pass) {
			t.Errorf("URL %q: the password %q shows in %q", raw, pass, out)
		}
	})
}
