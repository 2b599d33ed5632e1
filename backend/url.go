package backend

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
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
