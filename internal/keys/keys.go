// Package keys turns lock keys into names in a store, for the drivers
// (which may import it: it is internal to the module they live in). Each
// store's driver lays its names out its own way (a Redis hash tag, an etcd
// key range, a ZooKeeper node); what they share is here: the escaping of
// the user's key into a part of a name that no other key, and no prefix,
// can take, and the check of a '/'-separated prefix.
//
// The escapings are percent-encodings of a set of bytes (always '%'
// itself), with upper-case hex: injective (distinct keys never share a
// name), and Unescape accepts exactly what Escape writes, so a name the
// driver did not write is never taken for a lock. The names they write
// are what locks held by earlier versions are found by: each driver's
// TestKeysOnTheWire pins them.
package keys

import (
	"errors"
	"fmt"
	"strings"
)

// An Escaper percent-encodes the bytes a store cannot have in a key's
// part of a name.
type Escaper struct{ escaped [256]bool }

// The escapings of the stores whose names need one (sqllock and memlock
// need none).
var (
	// Redis escapes '{' and '}': the escaped key stands inside a hash tag,
	// which either would end early (or start anew).
	Redis = escaping(func(c byte) bool { return c == '{' || c == '}' })
	// Etcd escapes '/': the escaped key is one segment below the prefix,
	// and no lock's key range may contain another's.
	Etcd = escaping(func(c byte) bool { return c == '/' })
	// ZooKeeper keeps only ASCII letters, digits, '-' and '_': the escaped
	// key is one node name, never "", "." or "..", and holds no character
	// the server rejects ('.' is escaped too, so that the driver's own
	// node names, which contain one, are never a key's).
	ZooKeeper = escaping(func(c byte) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_')
	})
)

// escaping returns the Escaper of '%' and the bytes esc reports.
func escaping(esc func(c byte) bool) *Escaper {
	e := new(Escaper)
	for c := range 256 {
		e.escaped[c] = c == '%' || esc(byte(c))
	}
	return e
}

const hexDigits = "0123456789ABCDEF"

// Escape returns key with every escaped byte written as %XX. A key with
// none is returned as it is, without allocating.
func (e *Escaper) Escape(key string) string {
	n := 0
	for i := 0; i < len(key); i++ {
		if e.escaped[key[i]] {
			n++
		}
	}
	if n == 0 {
		return key
	}
	var b strings.Builder
	b.Grow(len(key) + 2*n)
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !e.escaped[c] {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xf])
	}
	return b.String()
}

// Unescape returns the key whose escaping is s; false if Escape writes s
// for no key (a bad or lower-case escape, an escape of a byte that stands
// as it is, or a byte that must be escaped).
func (e *Escaper) Unescape(s string) (string, bool) {
	if !strings.Contains(s, "%") {
		for i := 0; i < len(s); i++ {
			if e.escaped[s[i]] {
				return "", false
			}
		}
		return s, true
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			if e.escaped[c] {
				return "", false
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, lo := strings.IndexByte(hexDigits, s[i+1]), strings.IndexByte(hexDigits, s[i+2])
		if hi < 0 || lo < 0 || !e.escaped[hi<<4|lo] {
			return "", false
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	return b.String(), true
}

// CheckSegments checks the '/'-separated path p (without a leading or a
// trailing '/'): no segment may be empty, and each must pass check (nil:
// any). The error names the segment.
func CheckSegments(p string, check func(seg string) error) error {
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" {
			return errors.New("an empty segment")
		}
		if check == nil {
			continue
		}
		if err := check(seg); err != nil {
			return fmt.Errorf("segment %q: %w", seg, err)
		}
	}
	return nil
}
