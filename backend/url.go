package backend

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// URL is a parsed distlock URL. Unlike net/url it accepts several hosts
// separated by commas (redis://h1:6379,h2:6379/0, zk://h1,h2,h3/locks).
type URL struct {
	Scheme string
	// User holds the username and password, if any. Never print it: use
	// Redacted.
	User *url.Userinfo
	// Hosts lists host or host:port entries, in order; empty for "mem://".
	Hosts []string
	// Path is the unescaped path, e.g. "/0" or "/locks"; may be empty.
	Path string
	// Query holds the query parameters; readers mark what they use, and
	// Query.Err reports what nobody used.
	Query *Params
}

// ParseURL parses raw. Its errors wrap ErrInvalidConfig and never contain
// the password, nor the value of a password=, pass= or pwd= keyword. Input
// that is not a URL (no "scheme://") is not echoed, except a libpq keyword
// string ("host=db1 user=app dbname=appdb password=..."): its error says
// the postgres:// URL to write, from the host, port, user, database and
// TLS keywords before any password keyword, with PASSWORD in place of the
// password.
//
// A password holding '/', '?', '#' or '@' must percent-encode them (%2F,
// %3F, %23, %40): an '@' after the host part (in the path, the query or a
// fragment) is rejected, since it most likely ends a password that such a
// character cut short, which would otherwise be read as host, path or query
// and echoed. Percent-encode an '@' in a path or a parameter value too.
func ParseURL(raw string) (*URL, error) {
	scheme, rest, err := splitScheme(raw)
	if err != nil {
		return nil, err
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	if strings.Contains(tail, "@") {
		return nil, fmt.Errorf("%w: URL %q: '@' after the host: percent-encode '/', '?', '#' and '@' in a password (%%2F, %%3F, %%23, %%40), and '@' in a path or parameter (%%40)", ErrInvalidConfig, redactRaw(raw))
	}
	userinfo, hostlist, hasUser := "", authority, false
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		userinfo, hostlist, hasUser = authority[:i], authority[i+1:], true
	}
	u := &URL{Scheme: scheme}
	if hasUser {
		user, err := parseUserinfo(userinfo)
		if err != nil {
			return nil, fmt.Errorf("%w: URL %q: %v", ErrInvalidConfig, redactRaw(raw), err)
		}
		u.User = user
	}
	// Parse the rest with a placeholder host so net/url handles path and
	// query escaping; the host list is validated separately. The userinfo
	// stays out: net/url's errors may quote it.
	parsed, err := url.Parse(scheme + "://placeholder" + tail)
	if err != nil {
		return nil, fmt.Errorf("%w: URL %q: %v", ErrInvalidConfig, redactRaw(raw), stripURL(err))
	}
	if parsed.Fragment != "" || strings.Contains(tail, "#") {
		return nil, fmt.Errorf("%w: URL %q: fragments (#...) are not allowed", ErrInvalidConfig, redactRaw(raw))
	}
	rawPath, _, _ := strings.Cut(tail, "?")
	if scrubSecrets(rawPath) != rawPath || scrubSecrets(parsed.Path) != parsed.Path {
		// A keyword's value runs to the next space, as libpq reads it, so
		// a '?' in it would start the query and show the rest of it as
		// parameter names: the URL is refused, and echoed as redactRaw
		// shows it (every keyword's value hidden).
		return nil, fmt.Errorf("%w: URL %q: the path holds a password=, pass= or pwd= keyword: give a password as user:password@", ErrInvalidConfig, redactRaw(raw))
	}
	u.Path = parsed.Path
	if hostlist != "" {
		for h := range strings.SplitSeq(hostlist, ",") {
			if err := checkHost(h); err != nil {
				if scrubSecrets(h) != h {
					// The error would quote the host, or its port.
					err = errors.New("a host holds a password=, pass= or pwd= keyword: give a password as user:password@")
				}
				return nil, fmt.Errorf("%w: URL %q: %v", ErrInvalidConfig, redactRaw(raw), err)
			}
			u.Hosts = append(u.Hosts, h)
		}
	}
	q, err := url.ParseQuery(parsed.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: URL %q: query: %v", ErrInvalidConfig, redactRaw(raw), err)
	}
	u.Query = &Params{values: q, used: map[string]bool{}}
	return u, nil
}

// splitScheme splits raw into its lower-cased scheme and what follows
// "://". What net/url writes for a URL with neither host nor path
// ("mem:?ttl=2s" for mem://?ttl=2s) is taken as that URL.
func splitScheme(raw string) (scheme, rest string, err error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		s, r, colon := strings.Cut(raw, ":")
		switch {
		case !colon || !validScheme(strings.ToLower(s)):
		case r == "" || r[0] == '?':
			// net/url's form of scheme:// with neither host nor path
			// ("mem:?ttl=2s"): the same URL.
			scheme, rest, ok = s, r, true
		case r[0] == '/':
			// Not a URL: only the (valid) scheme is echoed.
			return "", "", fmt.Errorf("%w: URL %q: the '//' before the host is missing (want e.g. %[3]s://host/...)", ErrInvalidConfig, strings.ToLower(s)+":...", strings.ToLower(s))
		}
	}
	if !ok || scheme == "" {
		// Not a URL, so nothing tells which part of it is a secret: none
		// of it is echoed.
		hint := ""
		if strings.Contains(raw, "=") {
			hint = "; a key=value connection string (host=... dbname=...) is not a URL: write it as " + keywordURL(raw)
		}
		return "", "", fmt.Errorf("%w: the URL has no scheme (want e.g. redis://host:6379)%s", ErrInvalidConfig, hint)
	}
	scheme = strings.ToLower(scheme)
	if !validScheme(scheme) {
		// What precedes "://" may be anything (a connection string
		// holding a file:// name): not echoed.
		return "", "", fmt.Errorf("%w: the URL's scheme (before \"://\") is not valid: want letters, digits, '+', '-' or '.'", ErrInvalidConfig)
	}
	return scheme, rest, nil
}

// keywordURL is the postgres:// URL to write for a libpq keyword string
// (host=db1 port=5432 user=app dbname=appdb sslmode=require): the
// string's own host, port, user, database and TLS settings, PASSWORD for
// the password, and placeholders for what it does not say. Only the
// keywords before the first that may hold a secret (password, passfile,
// sslpassword, pwd...) are read: nothing after a password is echoed, as
// a value with a space in it would otherwise show the password's tail.
// A keyword it does not know, a quoted value or a character a URL would
// need escaped gives the general form, echoing nothing.
func keywordURL(raw string) string {
	const general = "postgres://user:password@host:5432/dbname?sslmode=..."
	kw := map[string]string{}
	for _, tok := range strings.Fields(raw) {
		if secretKeyword.MatchString(tok) || strings.Contains(strings.ToLower(tok), "pass") {
			break
		}
		k, v, ok := strings.Cut(tok, "=")
		if !ok || v == "" || strings.ContainsAny(v, `'"\=`) {
			return general
		}
		switch k {
		case "port", "connect_timeout":
			if strings.Trim(v, "0123456789") != "" {
				return general
			}
		case "host", "user", "dbname", "sslmode", "application_name":
			if strings.ContainsAny(v, "@/?#%&:") {
				return general
			}
		case "sslrootcert", "sslcert", "sslkey": // file names, escaped in the query
		default:
			return general
		}
		kw[k] = v
	}
	or := func(k, def string) string {
		if v, ok := kw[k]; ok {
			return v
		}
		return def
	}
	u := url.URL{
		Scheme: "postgres",
		User:   url.UserPassword(or("user", "USER"), "PASSWORD"),
		Host:   net.JoinHostPort(or("host", "HOST"), or("port", "5432")),
		Path:   "/" + or("dbname", "DBNAME"),
	}
	q := url.Values{}
	for _, k := range []string{"sslmode", "sslrootcert", "sslcert", "sslkey", "application_name"} {
		if v, ok := kw[k]; ok {
			q.Set(k, v)
		}
	}
	if v, ok := kw["connect_timeout"]; ok {
		q.Set("dial_timeout", v+"s")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// parseUserinfo reads user[:password], percent-decoding both. Its errors
// never quote the password.
func parseUserinfo(s string) (*url.Userinfo, error) {
	rawUser, rawPass, hasPass := strings.Cut(s, ":")
	user, err := url.PathUnescape(rawUser)
	if err != nil || strings.ContainsAny(rawUser, " /?#[]") || hasControl(user) {
		return nil, errors.New("the user name is not validly percent-encoded")
	}
	if !hasPass {
		return url.User(user), nil
	}
	pass, err := url.PathUnescape(rawPass)
	if err != nil || strings.ContainsAny(rawPass, " ") || hasControl(pass) {
		return nil, errors.New("the password is not validly percent-encoded")
	}
	return url.UserPassword(user, pass), nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

func checkHost(h string) error {
	if h == "" {
		return errors.New("empty host in host list")
	}
	host, port := h, ""
	if strings.HasPrefix(h, "[") { // [ipv6]:port
		end := strings.Index(h, "]")
		if end < 0 {
			return fmt.Errorf("host %q: missing ']'", h)
		}
		host, port = h[1:end], strings.TrimPrefix(h[end+1:], ":")
		if h[end+1:] != "" && !strings.HasPrefix(h[end+1:], ":") {
			return fmt.Errorf("host %q: junk after ']'", h)
		}
	} else if i := strings.LastIndex(h, ":"); i >= 0 {
		host, port = h[:i], h[i+1:]
	}
	if host == "" {
		return fmt.Errorf("host %q: empty host name", h)
	}
	if strings.ContainsAny(host, " /?#@\\") {
		return fmt.Errorf("host %q: invalid character", h)
	}
	if port != "" || strings.HasSuffix(h, ":") {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("host %q: port %q is not a number from 1 to 65535", h, port)
		}
	}
	return nil
}

// HostsWithDefaultPort returns u.Hosts with port added where absent.
func (u *URL) HostsWithDefaultPort(port int) []string {
	out := make([]string, len(u.Hosts))
	for i, h := range u.Hosts {
		if strings.HasPrefix(h, "[") {
			if strings.HasSuffix(h, "]") {
				h += ":" + strconv.Itoa(port)
			}
		} else if !strings.Contains(h, ":") {
			h += ":" + strconv.Itoa(port)
		}
		out[i] = h
	}
	return out
}

// Password returns the password and whether one was given.
func (u *URL) Password() (string, bool) {
	if u.User == nil {
		return "", false
	}
	return u.User.Password()
}

// Username returns the user name, or "".
func (u *URL) Username() string {
	if u.User == nil {
		return ""
	}
	return u.User.Username()
}

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

// Params reads typed query parameters, records which were read, and
// collects every problem so one error can name all of them. Its errors
// name each bad parameter, and show its value only where Redacted does
// (SafeParams): a secret given to the wrong parameter stays hidden.
type Params struct {
	values url.Values
	used   map[string]bool
	errs   []error
	bad    map[string]bool // parameters whose value has been found wrong
}

// badValue records err about parameter name's value, unless one was
// recorded already: a value read twice (the portable layer and the driver
// both read ttl, with different bounds) is wrong once.
func (p *Params) badValue(name string, err error) {
	if p.bad[name] {
		return
	}
	if p.bad == nil {
		p.bad = map[string]bool{}
	}
	p.bad[name] = true
	p.errs = append(p.errs, err)
}

func (p *Params) get(name string) (string, bool) {
	p.used[name] = true
	vs, ok := p.values[name]
	if !ok {
		return "", false
	}
	if len(vs) > 1 {
		p.errs = append(p.errs, fmt.Errorf("parameter %q given %d times", name, len(vs)))
	}
	return vs[len(vs)-1], true
}

// Has reports whether the parameter is present (and marks it used).
func (p *Params) Has(name string) bool {
	_, ok := p.get(name)
	return ok
}

// String returns the parameter's value, or def if absent.
func (p *Params) String(name, def string) string {
	if v, ok := p.get(name); ok {
		return v
	}
	return def
}

// MaxParamDuration is the longest value a duration parameter takes: the
// portable layer's TTLLimit (a year). No timeout, TTL or interval of a
// lock is longer; a longer one is a typo (or a unit mistaken).
const MaxParamDuration = TTLLimit

// shown is how an error names parameter name given value v: name="v"
// where Redacted shows the value (as Redacted shows it), else the name
// alone.
func shown(name, v string) string {
	if safeParam(name) {
		return fmt.Sprintf("%s=%q", name, scrubSecrets(v))
	}
	return name
}

// Duration parses a Go duration ("1.5s", "300ms"); it must be > 0 and at
// most MaxParamDuration. NaN, infinities, exponents, a missing unit and
// values beyond int64 nanoseconds are refused.
func (p *Params) Duration(name string, def time.Duration) time.Duration {
	v, ok := p.get(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil || d <= 0:
		p.badValue(name, fmt.Errorf("parameter %s: want a positive duration such as 30s or 500ms", shown(name, v)))
		return def
	case d > MaxParamDuration:
		p.badValue(name, fmt.Errorf("parameter %s: want at most %s (a year)", shown(name, v), fmtDuration(MaxParamDuration)))
		return def
	}
	return d
}

// DurationIn parses a Go duration within [lo, hi] (lo > 0, hi at most
// MaxParamDuration).
func (p *Params) DurationIn(name string, def, lo, hi time.Duration) time.Duration {
	v, ok := p.get(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < lo || d > hi || d <= 0 || d > MaxParamDuration {
		p.badValue(name, fmt.Errorf("parameter %s: want from %s to %s, a duration such as 30s or 500ms", shown(name, v), fmtDuration(lo), fmtDuration(hi)))
		return def
	}
	return d
}

// fmtDuration writes d the short way: 24h rather than 24h0m0s.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// Int parses a decimal integer within [lo, hi].
func (p *Params) Int(name string, def, lo, hi int) int {
	v, ok := p.get(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		p.badValue(name, fmt.Errorf("parameter %s: want an integer from %d to %d", shown(name, v), lo, hi))
		return def
	}
	return n
}

// Bool parses true/false/1/0.
func (p *Params) Bool(name string, def bool) bool {
	v, ok := p.get(name)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.badValue(name, fmt.Errorf("parameter %s: want true or false", shown(name, v)))
		return def
	}
	return b
}

// Enum returns the value, which must be one of allowed (def if absent).
func (p *Params) Enum(name, def string, allowed ...string) string {
	v, ok := p.get(name)
	if !ok {
		return def
	}
	if !slices.Contains(allowed, v) {
		p.badValue(name, fmt.Errorf("parameter %s: want one of %s", shown(name, v), strings.Join(allowed, ", ")))
		return def
	}
	return v
}

// FailValue records that parameter name's value is wrong, found by the
// caller's own validation: "parameter name="value": want", with the value
// shown only where Redacted shows it. Drivers use it, not Fail, for any
// message about a parameter's value.
func (p *Params) FailValue(name, value, want string) {
	p.badValue(name, fmt.Errorf("parameter %s: %s", shown(name, value), want))
}

// Fail records a problem found by the caller's own validation. Its text
// must not quote a parameter's value (FailValue does that safely).
func (p *Params) Fail(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf(format, args...))
}

// Err reports every bad value and every parameter nobody read, in one
// error wrapping ErrInvalidConfig; nil if all is well.
func (p *Params) Err() error {
	errs := slices.Clone(p.errs)
	var unknown []string
	for name := range p.values {
		if !p.used[name] {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	if len(unknown) > 0 {
		errs = append(errs, fmt.Errorf("unknown parameter(s): %s", strings.Join(unknown, ", ")))
	}
	if len(errs) == 0 {
		return nil
	}
	var msgs []string
	for _, e := range errs {
		// A driver's message may quote a path, a file name or a store's
		// error holding a password keyword: its value is hidden.
		m := quotedSecretKeyword.ReplaceAllString(e.Error(), "${1}${2}xxxxx")
		if !slices.Contains(msgs, m) { // a value read twice is wrong once
			msgs = append(msgs, m)
		}
	}
	return fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(msgs, "; "))
}
