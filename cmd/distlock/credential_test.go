package main

import (
	"strings"
	"testing"
)

// TestNoCredentialFromDSN: a libpq keyword string (not a URL) given as
// --url or $DISTLOCK_URL, and a password keyword or a secret parameter in
// a URL, show in no error or help text (issue 27, item 7).
func TestNoCredentialFromDSN(t *testing.T) {
	const secret = "PgSecretPw"
	const dsn = "host=127.0.0.1 port=25439 user=pgadmin password=" + secret + " dbname=appdb"
	for _, tc := range []struct {
		env  []string
		args []string
		code int // the exit status wanted, or -1 for any
	}{
		{nil, []string{"status", "--url", dsn, "--key", "k"}, ExitUsage},
		{nil, []string{"status", "--url", "host=h pwd=" + secret, "--key", "k", "--json"}, ExitUsage},
		{nil, []string{"list", "--url", dsn}, ExitUsage},
		{nil, []string{"run", "--url", dsn, "--key", "k", "--no-wait", "--", "true"}, ExitUsage},
		{nil, []string{"elect", "--url", dsn, "--name", "e", "--", "true"}, ExitUsage},
		{nil, []string{"status", "--url", "redis:/127.0.0.1 password=" + secret, "--key", "k"}, ExitUsage},
		{nil, []string{"status", "--url", "mem://?token=" + secret, "--key", "k"}, ExitUsage},
		{nil, []string{"status", "--url", "mysql://127.0.0.1:1/db%20password=" + secret + "?dial_timeout=300ms", "--key", "k", "--timeout", "5s"}, -1},
		{[]string{"DISTLOCK_URL=" + dsn}, []string{"status", "--help"}, 0},
		{[]string{"DISTLOCK_URL=" + dsn}, []string{"status", "--key", "k"}, ExitUsage},
	} {
		out, code := runCLI(t, tc.env, tc.args...)
		if strings.Contains(out, secret) {
			t.Errorf("distlock %q (env %q): exit %d, the output shows the password:\n%s", tc.args, tc.env, code, out)
		}
		if tc.code >= 0 && code != tc.code {
			t.Errorf("distlock %q (env %q): exit %d, want %d:\n%s", tc.args, tc.env, code, tc.code, out)
		}
	}
}
