package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/distlock/distlock/sandbox"
)

// A wrong password exits 64 (configuration: retrying cannot help) on
// every store, in one line that names the user and never the password
// (issue 32, item 2: Redis said 64, PostgreSQL 69).
func TestWrongPasswordExitCode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	const secret = "wrong-Zq8-never-printed"
	withPassword := func(raw, user string) string {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(user, secret)
		return u.String()
	}
	for _, tc := range []struct {
		kind sandbox.Kind
		user string
	}{
		// Redis's default user takes any password: another user is refused.
		{sandbox.Redis, "nobody"},
		{sandbox.Postgres, sandbox.PostgresUser},
		{sandbox.MariaDB, "root"},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			u := withPassword(sandbox.StartT(t, sandbox.Spec{Kind: tc.kind}).URL(), tc.user)
			for _, args := range [][]string{
				{"status", "--url", u, "--key", "k", "--timeout", "10s"},
				{"run", "--url", u, "--key", "k", "--no-wait", "--", "true"},
			} {
				out, code := runCLI(t, nil, args...)
				if code != ExitUsage {
					t.Errorf("distlock %s: exit %d, want %d (invalid configuration):\n%s", args[0], code, ExitUsage, out)
				}
				if strings.Contains(out, secret) {
					t.Errorf("distlock %s shows the password:\n%s", args[0], out)
				}
				if !strings.Contains(out, tc.user) {
					t.Errorf("distlock %s does not name the user %q:\n%s", args[0], tc.user, out)
				}
				if n := strings.Count(strings.TrimSpace(out), "\n"); n > 0 {
					t.Errorf("distlock %s: %d lines, want one:\n%s", args[0], n+1, out)
				}
			}
		})
	}
}
