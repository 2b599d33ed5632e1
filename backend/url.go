package backend

import (
	"errors"
	"fmt"
	"net/url"
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
// the password.
func ParseURL(raw string) (*URL, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || scheme == "" {
		return nil, fmt.Errorf("%w: URL %q has no scheme (want e.g. redis://host:6379)", ErrInvalidConfig, redactRaw(raw))
	}
	scheme = strings.ToLower(scheme)
	if !validScheme(scheme) {
		return nil, fmt.Errorf("%w: URL scheme %q is not valid", ErrInvalidConfig, scheme)
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	userinfo, hostlist := "", authority
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		userinfo, hostlist = authority[:i], authority[i+1:]
	}
	// Parse with a placeholder host so net/url handles userinfo, path and
	// query escaping; the host list is validated separately.
	placeholder := scheme + "://"
	if userinfo != "" {
		placeholder += userinfo + "@"
	}
	parsed, err := url.Parse(placeholder + "placeholder" + tail)
	if err != nil {
		return nil, fmt.Errorf("%w: URL %q: %v", ErrInvalidConfig, redactRaw(raw), stripURL(err))
	}
	if parsed.Fragment != "" {
		return nil, fmt.Errorf("%w: URL %q: fragments (#...) are not allowed", ErrInvalidConfig, redactRaw(raw))
	}
	u := &URL{Scheme: scheme, User: parsed.User, Path: parsed.Path}
	if hostlist != "" {
		for h := range strings.SplitSeq(hostlist, ",") {
			if err := checkHost(h); err != nil {
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

// Redacted returns the URL as a string with any password replaced by "xxxxx".
func (u *URL) Redacted() string {
	var b strings.Builder
	b.WriteString(u.Scheme + "://")
	if u.User != nil {
		b.WriteString(url.PathEscape(u.User.Username()))
		if _, ok := u.User.Password(); ok {
			b.WriteString(":xxxxx")
		}
		b.WriteString("@")
	}
	b.WriteString(strings.Join(u.Hosts, ","))
	b.WriteString(u.Path)
	if q := u.Query.values.Encode(); q != "" {
		b.WriteString("?" + q)
	}
	return b.String()
}

// redactRaw hides the password of a URL that failed to parse.
func redactRaw(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	end := len(rest)
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		end = i
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return raw
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return raw
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
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
// collects every problem so one error can name all of them.
type Params struct {
	values url.Values
	used   map[string]bool
	errs   []error
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

// Duration parses a Go duration ("1.5s", "300ms"); it must be > 0.
func (p *Params) Duration(name string, def time.Duration) time.Duration {
	v, ok := p.get(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		p.errs = append(p.errs, fmt.Errorf("parameter %s=%q: want a positive duration such as 30s or 500ms", name, v))
		return def
	}
	return d
}

// Int parses an integer within [lo, hi].
func (p *Params) Int(name string, def, lo, hi int) int {
	v, ok := p.get(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		p.errs = append(p.errs, fmt.Errorf("parameter %s=%q: want an integer from %d to %d", name, v, lo, hi))
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
		p.errs = append(p.errs, fmt.Errorf("parameter %s=%q: want true or false", name, v))
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
		p.errs = append(p.errs, fmt.Errorf("parameter %s=%q: want one of %s", name, v, strings.Join(allowed, ", ")))
		return def
	}
	return v
}

// Fail records a problem found by the caller's own validation.
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
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(msgs, "; "))
}
