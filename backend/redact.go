package backend

import (
	"errors"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Redacted returns the URL as a string with any password replaced by
// "xxxxx", and the value of every query parameter not known to be harmless
// (see SafeParams) too, so a credential given as a parameter
// (password=..., token=...) is not shown either.
func (u *URL) Redacted() string {
	var b strings.Builder
	b.WriteString(u.Scheme + "://")
	if u.User != nil {
		b.WriteString(url.PathEscape(scrubSecrets(u.User.Username())))
		if _, ok := u.User.Password(); ok {
			b.WriteString(":xxxxx")
		}
		b.WriteString("@")
	}
	for i, h := range u.Hosts {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(scrubSecrets(h))
	}
	b.WriteString((&url.URL{Path: scrubSecrets(u.Path)}).EscapedPath())
	if u.Query != nil && len(u.Query.values) > 0 {
		shown := url.Values{}
		for name, vs := range u.Query.values {
			if !safeParam(name) {
				vs = slices.Repeat([]string{"xxxxx"}, len(vs))
			} else {
				vs = slices.Clone(vs)
				for i, v := range vs {
					vs[i] = scrubSecrets(v) // a password keyword mistyped into a value
				}
			}
			shown[name] = vs
		}
		b.WriteString("?" + shown.Encode())
	}
	return b.String()
}

// SafeParams are the query parameters whose values Redacted shows: the
// parameters of the project's own backends, none of which holds a secret
// (tls_key and tls_ca are file names). Any other parameter's value is
// replaced by "xxxxx".
var SafeParams = []string{
	"acl", "allow_eviction", "application_name", "cluster_refresh",
	"connect_timeout", "create_table", "dial_timeout", "lock_wait_timeout",
	"mode", "pool_size", "prefix", "read_timeout", "session_timeout",
	"sslcert", "sslkey", "sslmode", "sslrootcert", "table", "tls", "tls_ca",
	"tls_cert", "tls_insecure_skip_verify", "tls_key", "tls_server_name",
	"ttl", "wait", "wait_replicas", "wait_timeout", "write_timeout",
}

func safeParam(name string) bool { return slices.Contains(SafeParams, name) }

// RedactURL returns raw with any password hidden, for messages and help
// texts: the Redacted form when raw parses, else raw with everything
// between "://" and the last '@' hidden, the query hidden and the value of
// any password=, pass= or pwd= keyword hidden; "xxxxx" for input that is
// not a URL at all (no valid "scheme://").
func RedactURL(raw string) string {
	if u, err := ParseURL(raw); err == nil {
		return u.Redacted()
	}
	return redactRaw(raw)
}

// redactRaw hides the password of a URL that failed to parse. As the
// password may hold any character, everything from "://" to the last '@'
// anywhere in raw is hidden (too much, when an '@' belongs to the path or
// query, rather than too little), and so is anything after a '?' (query
// values may be secrets) and the value of a password keyword. Input with
// no valid "scheme://" is not a URL: nothing tells which part of it is a
// secret (a libpq string "host=... password=..."), so all of it is hidden.
func redactRaw(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || !validScheme(strings.ToLower(scheme)) {
		return "xxxxx"
	}
	out := scheme + "://"
	rest = scrubSecrets(rest) // first: a keyword's value may hold '@', '?' or '#'
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		out += "xxxxx"
		if strings.ContainsAny(rest[:at], "?#") && strings.ContainsAny(rest[at:], "=&") {
			// The query began before that '@' ("?token=a@b&password=c"):
			// what follows may be more of it.
			return out + "@xxxxx"
		}
		rest = rest[at:]
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i+1] + "xxxxx"
	}
	return out + rest
}

// secretKeyword matches a password given as a keyword, as in libpq's
// "password=..." (also with spaces around '=' or the value in quotes),
// ODBC's "pwd=..." or "pass=...", percent-encoded or not, with its value:
// up to a space (as libpq reads it: too much of an ODBC "pwd=x;server=h"
// rather than too little), or to the closing quote.
var secretKeyword = regexp.MustCompile(`(?i)(pass(?:word|wd)?|pwd)((?:\s|%20)*(?:=|%3D)(?:\s|%20)*)('(?:[^'\\]|\\.)*'?|(?:[^\s%]|%[^2]|%2[^0]|%2?$)*)`)

// quotedSecretKeyword is secretKeyword for a message, where values may be
// quoted with %q: a value also ends at an unescaped '"'.
var quotedSecretKeyword = regexp.MustCompile(`(?i)(pass(?:word|wd)?|pwd)((?:\s|%20)*(?:=|%3D)(?:\s|%20)*)((?:[^\s"\\]|\\.)*)`)

// scrubSecrets hides the value of every password keyword in s.
func scrubSecrets(s string) string {
	return secretKeyword.ReplaceAllString(s, "${1}${2}xxxxx")
}

// stripURL drops the URL from a *url.Error, which may hold a password.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
