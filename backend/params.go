package backend

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

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
