package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// binary is the distlock command built once for the tests that drive it.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "distlock-cli")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "distlock")
	if out, err := exec.Command("go", "build", "-race", "-o", binary, ".").CombinedOutput(); err != nil {
		panic("building distlock: " + err.Error() + "\n" + string(out))
	}
	code := 0
	func() {
		defer os.RemoveAll(dir)
		goleak.VerifyTestMain(exitRecorder{m, &code})
	}()
	os.Exit(code)
}

// startPiped starts c with its stderr on the test's and returns its
// stdout; c is killed and waited for when t ends.
func startPiped(t *testing.T, c *exec.Cmd) io.Reader {
	t.Helper()
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	return out
}

// waitExit waits up to 30 s for the holder c to end and returns what its
// Wait returned; a holder still running fails t ("did not end after"
// what).
func waitExit(t *testing.T, c *exec.Cmd, what string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the holder did not end after " + what)
		return nil
	}
}

type exitRecorder struct {
	m    *testing.M
	code *int
}

func (e exitRecorder) Run() int { *e.code = e.m.Run(); return *e.code }

// distlock runs the binary and returns its combined output and exit code.
func runCLI(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	// Bounded: a hanging distlock fails its test instead of the package.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running distlock: %v", err)
	}
	return string(out), 0
}

func TestRunPassesExitCodeAndEnvironment(t *testing.T) {
	out, code := runCLI(t, nil, "run", "--url", "mem://", "--key", "job/1", "--",
		"sh", "-c", `echo "key=$DISTLOCK_KEY token=$DISTLOCK_TOKEN owner=$DISTLOCK_OWNER"; exit 7`)
	if code != 7 {
		t.Errorf("exit code %d, want the command's 7; output:\n%s", code, out)
	}
	line, _, _ := strings.Cut(out, "\n")
	key, owner, _ := strings.Cut(line, " owner=")
	if key != "key=job/1 token=1" || !ownerPattern.MatchString(owner) {
		t.Errorf("the command did not see the lock in its environment (DISTLOCK_OWNER host:pid:random):\n%s", out)
	}
}

func TestElectRunsCommandAsLeader(t *testing.T) {
	out, code := runCLI(t, nil, "elect", "--url", "mem://", "--name", "sched", "--value", "replica-a", "--",
		"sh", "-c", `echo "election=$DISTLOCK_ELECTION value=$DISTLOCK_VALUE term=$DISTLOCK_TERM token=$DISTLOCK_TOKEN key=$DISTLOCK_KEY"; exit 5`)
	if code != 5 {
		t.Errorf("exit code %d, want the command's 5; output:\n%s", code, out)
	}
	if !strings.Contains(out, "election=sched value=replica-a term=1 token=1 key=sched") {
		t.Errorf("the command did not see its leadership in its environment:\n%s", out)
	}
	// The default value is HOST:PID, a valid candidate value.
	if out, code := runCLI(t, nil, "elect", "--url", "mem://", "--name", "sched", "--", "sh", "-c", `echo "value=$DISTLOCK_VALUE"`); code != 0 || !strings.Contains(out, ":") {
		t.Errorf("elect with the default value: exit %d, output %q", code, out)
	}
}

func TestRunSemaphore(t *testing.T) {
	out, code := runCLI(t, nil, "run", "--url", "mem://", "--key", "pool", "-n", "3", "--",
		"sh", "-c", `echo "permits=$DISTLOCK_PERMITS key=$DISTLOCK_KEY token=$DISTLOCK_TOKEN"`)
	if code != 0 || !strings.Contains(out, "permits=3 key=pool token=") {
		t.Errorf("run -n 3: exit %d, output %q", code, out)
	}
}

// TestRunSemaphoreOwner: permits are held under the owner id as a label
// (status then says which host and process hold them), the default one
// host:pid:random too; each grant's owner is the label and a suffix.
func TestRunSemaphoreOwner(t *testing.T) {
	out, code := runCLI(t, nil, "run", "--url", "mem://", "--key", "pool", "-n", "2", "--owner", "batch-7:99", "--",
		"sh", "-c", `echo "owner=$DISTLOCK_OWNER"`)
	if code != 0 || !regexp.MustCompile(`owner=batch-7:99\.[0-9a-f]{32}\n`).MatchString(out) {
		t.Errorf("run -n 2 --owner batch-7:99: exit %d, output %q, want owner batch-7:99.<suffix>", code, out)
	}
	out, code = runCLI(t, nil, "run", "--url", "mem://", "--key", "pool", "-n", "2", "--",
		"sh", "-c", `echo "owner=$DISTLOCK_OWNER"`)
	if code != 0 || !regexp.MustCompile(`owner=[^:\s]+:[0-9]+:[0-9a-f]+\.[0-9a-f]{32}\n`).MatchString(out) {
		t.Errorf("run -n 2: exit %d, output %q, want owner host:pid:random.<suffix>", code, out)
	}
}

func TestRunReadWrite(t *testing.T) {
	for _, side := range []string{"--read", "--write"} {
		out, code := runCLI(t, nil, "run", "--url", "mem://", "--key", "cfg", side, "--", "sh", "-c", `echo "key=$DISTLOCK_KEY"; exit 6`)
		if code != 6 || !strings.Contains(out, "key=cfg") {
			t.Errorf("run %s: exit %d, output %q; want the command's 6", side, code, out)
		}
	}
}

func TestRunSignalledCommand(t *testing.T) {
	_, code := runCLI(t, nil, "run", "--url", "mem://", "--key", "k", "--", "sh", "-c", "kill -TERM $$")
	if code != 128+15 {
		t.Errorf("exit code %d, want 143 for a command killed by SIGTERM", code)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"run", "--key", "k", "--", "true"}, "no backend URL"},
		{nil, []string{"run", "--url", "mem://", "--", "true"}, "--key is required"},
		{nil, []string{"run", "--url", "mem://", "--key", "k"}, "no command given"},
		{nil, []string{"run", "--url", "mem://", "--key", "k", "--wait", "1s", "--no-wait", "--", "true"}, "exclude each other"},
		{nil, []string{"run", "--url", "mem://?bogus=1", "--key", "k", "--", "true"}, "unknown parameter(s): bogus"},
		{nil, []string{"run", "--url", "mem://", "--key", "", "--", "true"}, "--key is required"},
		{nil, []string{"run", "--url", "mem://", "--key", "a\x01b", "--", "true"}, "control character"},
		{nil, []string{"run", "--bogus-flag"}, "unknown flag"},
		{[]string{"DISTLOCK_URL=nosuch://x"}, []string{"status", "--key", "k"}, `unknown URL scheme "nosuch"`},
		{nil, []string{"nosuch"}, `unknown command "nosuch"`},
		{nil, []string{"stauts"}, "did you mean status?"},
		{nil, []string{"help", "nosuch"}, `unknown help topic "nosuch"`},
		{nil, []string{"completion", "nosh"}, `unknown command "nosh"`},
		{nil, []string{"-v"}, "unknown shorthand flag"},
		{nil, []string{"version", "extra"}, `unknown command "extra"`},
		{nil, []string{"status", "--url", "mem://", "--key", "k", "extra"}, `unknown command "extra"`},
		{nil, []string{"status", "--url", "mem://", "--key", "k", "--timeout", "0"}, "--timeout must be positive"},
		{nil, []string{"hold", "--url", "mem://"}, "--key is required"},
		{nil, []string{"hold", "--url", "mem://", "--key", "k", "--", "true"}, `unknown command "true"`},
		{nil, []string{"list", "--url", "mem://", "--limit", "-1"}, "--limit must not be negative"},
		{nil, []string{"run", "--url", "mem://", "--key", "k", "-n", "0", "--", "true"}, "-n must be 1 to"},
		{nil, []string{"run", "--url", "mem://", "--key", "k", "-n", "-2", "--", "true"}, "-n must be 1 to"},
		{nil, []string{"run", "--url", "mem://", "--key", "k", "-n", "two", "--", "true"}, "invalid argument"},
		{nil, []string{"run", "--url", "mem://", "--key", "k", "--read", "--write", "--", "true"}, "exclude each other"},
		{nil, []string{"run", "--url", "mem://", "--key", "k", "-n", "2", "--read", "--", "true"}, "exclude each other"},
		{nil, []string{"elect", "--url", "mem://", "--", "true"}, "--name is required"},
		{nil, []string{"elect", "--url", "mem://", "--name", "e"}, "no command given"},
		{nil, []string{"elect", "--url", "mem://", "--name", "e", "--value", "a b", "--", "true"}, "--value"},
		{nil, []string{"elect", "--url", "mem://", "--name", "e", "--wait", "-1s", "--", "true"}, "must not be negative"},
		{nil, []string{"elect", "--name", "e", "--", "true"}, "no backend URL"},
	} {
		out, code := runCLI(t, tc.env, tc.args...)
		if code != 64 || !strings.Contains(out, tc.want) {
			t.Errorf("distlock %q: exit %d, output %q; want 64 and %q", tc.args, code, out, tc.want)
		}
	}
}

func TestStatusJSON(t *testing.T) {
	out, code := runCLI(t, nil, "status", "--url", "mem://", "--key", "k", "--json")
	if code != ExitFree {
		t.Fatalf("exit %d, want %d (free): %s", code, ExitFree, out)
	}
	var st stateJSON
	if err := json.Unmarshal([]byte(out), &st); err != nil || strings.Count(out, "\n") != 1 {
		t.Fatalf("status --json printed %q (%v), want one line of JSON", out, err)
	}
	if st.Held || st.Key != "k" || st.Backend != "mem" || st.Waiters != -1 {
		t.Errorf("status = %+v", st)
	}
}

// TestNoCredentialInOutput: no error, help text or status output shows a
// password, whatever characters it holds (issue 12, item 11).
func TestNoCredentialInOutput(t *testing.T) {
	const secret = "s3cr"
	for _, tc := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"status", "--url", "mysql://root:" + secret + "/ss@127.0.0.1:1/db", "--key", "k"}},
		{nil, []string{"status", "--url", "mysql://root:" + secret + "?ss@127.0.0.1:1/db", "--key", "k"}},
		{nil, []string{"status", "--url", "mysql://root:" + secret + "#ss@127.0.0.1:1/db", "--key", "k"}},
		{nil, []string{"run", "--url", "redis://u:" + secret + "@127.0.0.1:1/0?dial_timeout=300ms", "--key", "k", "--no-wait", "--", "true"}},
		{nil, []string{"run", "--url", "mem://?password=" + secret, "--key", "k", "--", "true"}},
		{[]string{"DISTLOCK_URL=redis://u:" + secret + "@127.0.0.1:1/0"}, []string{"run", "--help"}},
		{[]string{"DISTLOCK_URL=redis://u:" + secret + "@127.0.0.1:1/0"}, []string{"status", "--help"}},
		{[]string{"DISTLOCK_URL=mysql://root:" + secret + "/x@127.0.0.1:1/db"}, []string{"help", "run"}},
		{[]string{"DISTLOCK_URL=mysql://root:" + secret + "/x@127.0.0.1:1/db"}, []string{"status", "--key", "k"}},
	} {
		out, code := runCLI(t, tc.env, tc.args...)
		if strings.Contains(out, secret) {
			t.Errorf("distlock %q (env %q): exit %d, the output shows the password:\n%s", tc.args, tc.env, code, out)
		}
	}
}

// The store clients' own log lines (go-redis prints "redis: <date>
// pool.go:...: failed to dial" on stderr by itself) go through the
// command's logger: hidden by default, shown with --log-level=debug.
func TestClientLogsThroughLogger(t *testing.T) {
	out, code := runCLI(t, nil, "status", "--url", "redis://127.0.0.1:1/0", "--key", "k")
	if code != ExitUnavailable {
		t.Errorf("exit %d, want %d:\n%s", code, ExitUnavailable, out)
	}
	if strings.Contains(out, "pool.go") {
		t.Errorf("go-redis logged on its own:\n%s", out)
	}
	out, _ = runCLI(t, nil, "--log-level", "debug", "status", "--url", "redis://127.0.0.1:1/0", "--key", "k")
	if !strings.Contains(out, "level=DEBUG msg=\"go-redis: ") {
		t.Errorf("--log-level debug does not show go-redis's messages:\n%s", out)
	}
	out, code = runCLI(t, nil, "--log-level", "loud", "status", "--url", "mem://", "--key", "k")
	if code != ExitUsage || !strings.Contains(out, "--log-level") {
		t.Errorf("a bad --log-level: exit %d, want %d naming the flag:\n%s", code, ExitUsage, out)
	}
}

// An error the library already prefixes reads "distlock: " once.
func TestErrorPrefixOnce(t *testing.T) {
	out, code := runCLI(t, nil, "status", "--url", "mem://?bogus=1", "--key", "k")
	if code != ExitUsage || strings.Contains(out, "distlock: distlock:") || !strings.Contains(out, "distlock: open") {
		t.Errorf("exit %d, output %q: want 64 and one 'distlock: ' prefix", code, out)
	}
}

func TestElectProclaim(t *testing.T) {
	out, code := runCLI(t, nil, "elect", "--url", "mem://", "--name", "sched", "--value", "replica-a", "--proclaim", "--",
		"sh", "-c", `echo "fd=$DISTLOCK_PROCLAIM_FD"
echo replica-a:9090 >&3; read -r ack <&3; echo "ack=$ack"
echo "bad value" >&3; read -r ack <&3; echo "ack=$ack"`)
	if code != 0 {
		t.Errorf("exit code %d, want 0; output:\n%s", code, out)
	}
	if !strings.Contains(out, "fd=3\nack=ok\n") || !strings.Contains(out, "ack=error: proclaim \"sched\": invalid configuration: candidate value \"bad value\" must be printable ASCII") {
		t.Errorf("the command's proclamations were not answered ok, then with the refusal:\n%s", out)
	}
	// Without --proclaim fd 3 is not open in the command.
	if out, code := runCLI(t, nil, "elect", "--url", "mem://", "--name", "sched", "--", "sh", "-c", `echo x >&3`); code == 0 {
		t.Errorf("fd 3 open without --proclaim: exit 0, output %q", out)
	}
}
