package backend

import (
	"errors"
	"strings"
	"testing"
)

// A libpq keyword string is not a URL: the error says, in one line, the
// URL to write instead, built from the string's own host, port, user,
// database and TLS settings, with PASSWORD in place of the password, and
// never echoes the password nor anything after it (issue 32, item 3).
func TestKeywordDSNHint(t *testing.T) {
	const secret = "Zq8SecretPw"
	for _, tc := range []struct {
		in, want string
	}{
		{"host=db1 port=5433 user=app dbname=appdb sslmode=require password=" + secret,
			"postgres://app:PASSWORD@db1:5433/appdb?sslmode=require"},
		{"host=db1 user=app dbname=appdb", "postgres://app:PASSWORD@db1:5432/appdb"},
		{"dbname=appdb host=10.0.0.7 user=app connect_timeout=5", "postgres://app:PASSWORD@10.0.0.7:5432/appdb?dial_timeout=5s"},
		// What follows the password is not read: placeholders instead.
		{"host=db1 user=app password=" + secret + " dbname=appdb", "postgres://app:PASSWORD@db1:5432/DBNAME"},
		// A keyword distlock does not know, or a quoted value: the general
		// form, nothing echoed.
		{"host=db1 user=app target_session_attrs=any", "postgres://user:password@host:5432/dbname"},
		{"host=db1 user='a b'", "postgres://user:password@host:5432/dbname"},
	} {
		_, err := ParseURL(tc.in)
		if !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("ParseURL(%q) = %v, want ErrInvalidConfig", tc.in, err)
		}
		t.Logf("%q: %v", tc.in, err)
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseURL(%q): %v\nwant the hint %s", tc.in, err, tc.want)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("ParseURL(%q) shows the password: %v", tc.in, err)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseURL(%q): several lines: %q", tc.in, err)
		}
	}
}
