package distlock

import (
	"errors"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzCheckKey: checkKey never panics, accepts exactly the non-empty,
// bounded, valid UTF-8 keys without control characters, and its errors
// match ErrInvalidKey.
func FuzzCheckKey(f *testing.F) {
	for _, k := range []string{"a", "invoices/2026-11", "a\x01b", "", "\xff", "ключ 🔒", "{x}:y%7D", "a\u0085b", string(make([]byte, 1025))} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := checkKey(key, MaxKeyLen)
		valid := key != "" && len(key) <= MaxKeyLen && utf8.ValidString(key)
		for _, r := range key {
			if unicode.IsControl(r) || r == utf8.RuneError {
				valid = false
			}
		}
		if valid != (err == nil) {
			t.Errorf("checkKey(%q) = %v, want valid=%v", key, err, valid)
		}
		if err != nil && !errors.Is(err, ErrInvalidKey) {
			t.Errorf("checkKey(%q) = %v, not matching ErrInvalidKey", key, err)
		}
	})
}
