// Package urltest checks a driver's URL parsing, for the drivers' own
// tests: every number parameter refuses what is not a usable number (NaN,
// infinities, exponents, negative, zero, overflow, beyond its range) with
// backend.ErrInvalidConfig naming the parameter, and no credential (the
// user-info password, a password= keyword, a query value Redacted hides)
// shows in any error (issue 27, items 6 and 7).
//
// The numbers are parsed once, by backend.Params; these checks hold each
// driver to using it.
package urltest

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/distlock/distlock/backend"
)

// Parser describes a driver's URL parsing.
type Parser struct {
	// Base is a valid URL of the driver (Parse accepts it); the checks add
	// parameters to it. Its scheme is the first of Schemes.
	Base string
	// Schemes are the schemes Parse reads; the fuzz target tries each.
	Schemes []string
	// Durations and Ints are the driver's duration and integer
	// parameters; Others the rest it reads.
	Durations, Ints, Others []string
	// Parse is the driver's parsing of u, without dialling: nil, or an
	// error wrapping backend.ErrInvalidConfig.
	Parse func(u *backend.URL) error
	// ParseRaw, if set instead, parses the URL itself (distlock.Open of a
	// backend that does not dial).
	ParseRaw func(raw string) error
}

// BadDurations are values no duration parameter takes: not Go durations
// (NaN, infinities, exponents, hexadecimal, no unit, inner spaces), not
// positive, beyond int64 nanoseconds, or beyond backend.MaxParamDuration.
var BadDurations = []string{
	"NaN", "nan", "Inf", "+Inf", "-Inf", "inf", "∞", "1e3s", "1e309", "1e3", "1E-3s",
	"0x10s", "1_000s", "1.5.5s", "5", "5 s", " 5s", "s", "", "-1s", "-5ms", "-0s", "0",
	"0s", "9999999999h", "2562048h", "2562047h", "9223372036854775807ns", "8761h",
	"-9223372036854775808ns",
}

// BadInts are values no integer parameter takes (all of the project's
// drivers' integer parameters are at least 0).
var BadInts = []string{
	"NaN", "Inf", "-Inf", "1e3", "1E3", "1.5", "0x10", "1_000", " 1", "1 ", "",
	"99999999999999999999", "-99999999999999999999", "9223372036854775808", "-1", "١",
}

// raw returns p.Base with parameter name=value added.
func (p Parser) with(name, value string) string {
	sep := "?"
	if strings.Contains(p.Base, "?") {
		sep = "&"
	}
	return p.Base + sep + url.QueryEscape(name) + "=" + url.QueryEscape(value)
}

// parseErr parses raw as a URL and then as the driver does.
func (p Parser) parseErr(raw string) (redacted string, err error) {
	u, err := backend.ParseURL(raw)
	if err != nil {
		return "", err
	}
	redacted = u.Redacted()
	if p.ParseRaw != nil {
		return redacted, p.ParseRaw(raw)
	}
	return redacted, p.Parse(u)
}

// CheckNumbers checks that Base parses, and that every duration and
// integer parameter refuses each of BadDurations or BadInts with
// ErrInvalidConfig naming it, echoing the value only as Redacted shows it.
func CheckNumbers(t *testing.T, p Parser) {
	t.Helper()
	if _, err := p.parseErr(p.Base); err != nil {
		t.Fatalf("%s: %v", p.Base, err)
	}
	check := func(name string, values []string) {
		for _, v := range values {
			raw := p.with(name, v)
			red, err := p.parseErr(raw)
			switch {
			case err == nil:
				t.Errorf("%s: accepted", raw)
			case !errors.Is(err, backend.ErrInvalidConfig):
				t.Errorf("%s: %v, want ErrInvalidConfig", raw, err)
			case !strings.Contains(err.Error(), "parameter "+name):
				t.Errorf("%s: %q does not name the parameter %s", raw, err, name)
			case !strings.Contains(red, name+"="+url.QueryEscape(v)) && len(v) >= 3 && strings.Contains(err.Error(), v):
				t.Errorf("%s: %q shows the value, which Redacted (%s) hides", raw, err, red)
			}
		}
	}
	for _, name := range p.Durations {
		check(name, BadDurations)
	}
	for _, name := range p.Ints {
		check(name, BadInts)
	}
}

// CheckHidden checks that no parameter the driver reads echoes in its
// error a (wrong) value that Redacted hides.
func CheckHidden(t *testing.T, p Parser) {
	t.Helper()
	const secret = "Zq9SecretValue"
	for _, name := range slices.Concat(p.Durations, p.Ints, p.Others) {
		for _, v := range []string{secret, "-" + secret, secret + "/x.pem", "verify-" + secret} {
			raw := p.with(name, v)
			red, err := p.parseErr(raw)
			if err != nil && strings.Contains(err.Error(), secret) && !strings.Contains(red, secret) {
				t.Errorf("%s: %q shows the value of %s, which Redacted (%s) hides", raw, err, name, red)
			}
		}
	}
}

// Fuzz runs a fuzz target over p: the driver's parsing never panics, its
// errors wrap ErrInvalidConfig, and no credential shows in what it and
// ParseURL report (the same property as backend's FuzzParseURL, through
// the driver's own checks). Seeds: every parameter with each bad number,
// and the credential forms of issue 27.
func Fuzz(f *testing.F, p Parser) {
	u, err := backend.ParseURL(p.Base)
	if err != nil {
		f.Fatal(err)
	}
	hostpath := strings.TrimPrefix(p.Base, u.Scheme+"://")
	if i := strings.Index(hostpath, "?"); i >= 0 {
		hostpath = hostpath[:i]
	}
	for _, name := range p.Durations {
		for _, v := range BadDurations {
			f.Add(uint8(0), "u", "Secret123", hostpath, name, v)
		}
	}
	for _, name := range p.Ints {
		for _, v := range BadInts {
			f.Add(uint8(0), "u", "Secret123", hostpath, name, v)
		}
	}
	for i, name := range slices.Concat(p.Durations, p.Ints, p.Others) {
		// The password after a keyword in the value (name=x password=...).
		f.Add(uint8(i), "pgadmin", "PgSecretPw", hostpath, name, "x")
		f.Add(uint8(i), "pgadmin", "PgSecretPw", hostpath, name, "-1s")
		// A secret given to the parameter.
		f.Add(uint8(i), "pgadmin", "pw", hostpath, name, "PgSecretPw")
	}
	f.Add(uint8(0), "host=127.0.0.1 user=pgadmin", "PgSecretPw", "dbname=appdb", "token", "Hunter2Secret")
	f.Add(uint8(1), "a", "p@ss/w?rd#1", hostpath, "password", "Hunter2Secret")
	f.Fuzz(func(t *testing.T, si uint8, user, pass, hostpath, name, value string) {
		scheme := p.Schemes[int(si)%len(p.Schemes)]
		outputs := func(raw string) string {
			red, err := p.parseErr(raw)
			if err != nil && !errors.Is(err, backend.ErrInvalidConfig) {
				t.Errorf("%s: %v, want ErrInvalidConfig", raw, err)
			}
			return red + " " + backend.RedactURL(raw) + " " + errString(err)
		}
		forms := []struct {
			secret string
			form   func(secret string) string
		}{
			{pass, func(s string) string {
				return scheme + "://" + user + ":" + s + "@" + hostpath + "?" + url.QueryEscape(name) + "=" + url.QueryEscape(value)
			}},
			{pass, func(s string) string { return "host=" + user + " password=" + s + " " + hostpath }},
			{pass, func(s string) string {
				return scheme + "://" + hostpath + "?" + url.QueryEscape(name) + "=" + url.QueryEscape(value+" password="+s)
			}},
			{value, func(s string) string {
				return scheme + "://" + hostpath + "?" + url.QueryEscape(name) + "=" + url.QueryEscape(s)
			}},
		}
		for i, fm := range forms {
			raw := fm.form(fm.secret)
			out := outputs(raw)
			if i == 3 && slices.Contains(backend.SafeParams, name) {
				continue // a value Redacted shows
			}
			if Leaks(fm.secret, out, func(other string) string { return outputs(fm.form(other)) }) {
				t.Errorf("%s: the secret %q shows in %q", raw, fm.secret, out)
			}
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Leaks reports whether secret shows in out, the outputs for an input
// holding it, but not in alt(Innocuous(secret)), those for the same input
// with an innocuous secret of the same shape in its place: a secret that
// is also a host name or a word of the error text is no leak. Secrets
// shorter than 4 bytes, or with no letter or digit to change, are never
// taken to leak.
func Leaks(secret, out string, alt func(other string) string) bool {
	if len(secret) < 4 || strings.Contains("xxxxx", secret) || !strings.Contains(out, secret) {
		return false
	}
	other := Innocuous(secret)
	if other == secret {
		return false
	}
	return !strings.Contains(alt(other), secret)
}

// Innocuous returns s with every letter and digit changed and every other
// character kept, hex digits staying hex digits: a secret that parses (or
// fails to) as s does.
func Innocuous(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case strings.ContainsRune("abcdefABCDEF", r):
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
	}, s)
}
