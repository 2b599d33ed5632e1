package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// ownerPattern is a default owner id: host:pid:16 hex digits.
var ownerPattern = regexp.MustCompile(`^[!-9;-~]{1,64}:[0-9]+:[0-9a-f]{16}$`)

// A default owner id names the host and the process, and stays within
// the library's rules whatever the host name.
func TestOwnerID(t *testing.T) {
	for _, tc := range []struct{ host, want string }{
		{"web-3.example.com", "web-3.example.com:42:00ff"},
		{"", "unknown-host:42:00ff"},
		{"a b\tc:d", "a_b_c_d:42:00ff"},
		{"hôte", "h__te:42:00ff"},
		{strings.Repeat("h", 300), strings.Repeat("h", 64) + ":42:00ff"},
	} {
		if got := ownerID(tc.host, 42, "00ff"); got != tc.want || !validOwner(got) {
			t.Errorf("ownerID(%q) = %q, want %q", tc.host, got, tc.want)
		}
	}
	a, b := defaultOwner(), defaultOwner()
	host, _ := os.Hostname()
	if !ownerPattern.MatchString(a) || len(a) > 128 || a == b || !strings.Contains(a, fmt.Sprintf(":%d:", os.Getpid())) {
		t.Errorf("defaultOwner() = %q then %q: want host:pid:random, unique, within 128 bytes", a, b)
	}
	if host != "" && !strings.HasPrefix(a, ownerID(host, 0, "")[:min(len(host), 64)]) {
		t.Errorf("defaultOwner() = %q does not start with the host name %q", a, host)
	}
}

// A lock hold took shows, in status and list, the host and process that
// hold it, with its token and deadline; --owner names another owner.
func TestHoldOwnerShownByStatus(t *testing.T) {
	const url = "mem://hold-owner"
	line, closeStdin, done := startHold(t, context.Background(), url, 5*time.Second)
	defer func() { closeStdin(); <-done }()
	owner := strings.Split(strings.TrimSuffix(line, "\n"), "\t")[2]
	host, _ := os.Hostname()
	if !ownerPattern.MatchString(owner) || !strings.HasPrefix(owner, ownerID(host, os.Getpid(), "x")[:len(ownerID(host, os.Getpid(), "x"))-1]) {
		t.Fatalf("hold's owner %q, want %s:%d:RANDOM", owner, host, os.Getpid())
	}
	o := queryOpts{url: url, timeout: 10 * time.Second}
	var out bytes.Buffer
	if err := status(context.Background(), &out, o, "job"); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^job: held by ` + regexp.QuoteMeta(owner) + `, token 1, expires in [0-9.]+m?s \(at \d\d:\d\d:\d\d\.\d{3}Z\)\n$`).MatchString(out.String()) {
		t.Errorf("status printed %q", out.String())
	}
	out.Reset()
	if err := list(context.Background(), &out, o, "", 0); err != nil || !strings.Contains(out.String(), owner) {
		t.Errorf("list printed %q (%v), want the owner %s", out.String(), err, owner)
	}

	_, closeNamed, doneNamed := startHoldAs(t, context.Background(), lockOpts{url: url, key: "named", owner: "deploy-bot", openTimeout: 10 * time.Second})
	defer func() { closeNamed(); <-doneNamed }()
	out.Reset()
	o.asJSON = true
	if err := status(context.Background(), &out, o, "named"); err != nil {
		t.Fatal(err)
	}
	var st stateJSON
	if err := json.Unmarshal(out.Bytes(), &st); err != nil || st.holder().Owner != "deploy-bot" {
		t.Errorf("status --json of a lock held with --owner deploy-bot: %s (%v)", out.String(), err)
	}
}

// An owner id outside the library's rules is a usage error naming it.
func TestOwnerFlagRefused(t *testing.T) {
	for _, owner := range []string{"a b", strings.Repeat("x", 129)} {
		out, code := runCLI(t, nil, "hold", "--url", "mem://", "--key", "k", "--owner", owner)
		if code != ExitUsage || !strings.Contains(out, "owner id") {
			t.Errorf("hold --owner %q: exit %d, %q; want %d naming the owner id", owner, code, out, ExitUsage)
		}
	}
}
