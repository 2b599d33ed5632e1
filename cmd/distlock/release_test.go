package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/distlock/distlock/sandbox"
)

// TestReleaseForce: `release` refuses without --force (64, naming the
// flag); with it, it frees a lock `hold` holds in another process
// (exit 0, naming the freed owner and token), that hold reports its lease
// lost (70), `status` shows the record where the store keeps one, and a
// second release finds the lock free (3).
func TestReleaseForce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	for _, c := range []struct {
		kind   sandbox.Kind
		record bool
	}{{sandbox.Redis, true}, {sandbox.MariaDB, false}} {
		t.Run(string(c.kind), func(t *testing.T) {
			url := sandbox.StartT(t, sandbox.Spec{Kind: c.kind}).URL()
			holder, _, line, err := startCLI(t, "hold", "--url", url, "--key", "stuck", "--ttl", "2s")
			f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
			if err != nil || len(f) != 3 {
				t.Fatalf("hold printed %q (%v)", line, err)
			}
			if o, code := runCLI(t, nil, "release", "--url", url, "--key", "stuck"); code != ExitUsage || !strings.Contains(o, "without --force") {
				t.Errorf("release without --force: exit %d, %q; want %d naming --force", code, o, ExitUsage)
			}
			o, code := runCLI(t, nil, "release", "--url", url, "--key", "stuck", "--force", "--by", "alice", "--reason", "stuck deploy", "--json")
			var rj releaseJSON
			lines := strings.Split(strings.TrimSpace(o), "\n") // the log line (stderr) first
			if !strings.Contains(lines[0], `msg="distlock: lock forced free" key=stuck owner=`+f[2]+" token="+f[1]+` by=alice reason="stuck deploy"`) {
				t.Errorf("release --force logged %q, want the forced-free line with owner, token, by and reason", lines[0])
			}
			if code != ExitOK || json.Unmarshal([]byte(lines[len(lines)-1]), &rj) != nil || !rj.Freed || rj.Owner != f[2] || jsonNumber(rj.Token) != f[1] || rj.By != "alice" {
				t.Fatalf("release --force: exit %d, %q; want 0, freed owner %s token %s by alice", code, o, f[2], f[1])
			}
			err = holder.Wait()
			if code := holder.ProcessState.ExitCode(); code != ExitLost {
				t.Errorf("hold after its lock was forced free: exit %d (%v), want %d", code, err, ExitLost)
			}
			o, _ = runCLI(t, nil, "status", "--url", url, "--key", "stuck")
			if got := strings.Contains(o, "forced free by alice at ") && strings.Contains(o, "(stuck deploy)"); got != c.record {
				t.Errorf("status after the force: %q; record shown %v, want %v", o, got, c.record)
			}
			if o, code := runCLI(t, nil, "release", "--url", url, "--key", "stuck", "--force"); code != ExitFree {
				t.Errorf("release --force of a free lock: exit %d, %q; want %d", code, o, ExitFree)
			}
		})
	}
}
