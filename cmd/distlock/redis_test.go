package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/sandbox"
)

// These tests drive the binary against a real Redis server.
func TestRunAgainstRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis server")
	}
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	url := g.URL()

	// A holder process, waiting on its stdin so the test decides when it ends.
	holder := exec.Command(binary, "run", "--url", url, "--key", "job", "--ttl", "1s", "--grace", "2s", "--",
		"sh", "-c", `echo "ready $DISTLOCK_TOKEN"; trap 'echo got-term; exit 3' TERM; while :; do sleep 0.05; done`)
	out := startPiped(t, holder)
	lines := make(chan string, 16) // the holder's stdout, read before Wait closes it
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	first := <-lines
	if !strings.HasPrefix(first, "ready ") {
		t.Fatalf("holder did not report the lock: %q", first)
	}
	token := strings.TrimPrefix(first, "ready ")

	// Another process cannot take it.
	if o, code := runCLI(t, nil, "run", "--url", url, "--key", "job", "--no-wait", "--", "true"); code != ExitNotAcquired {
		t.Errorf("--no-wait on a held lock: exit %d, want %d\n%s", code, ExitNotAcquired, o)
	}
	if o, code := runCLI(t, nil, "run", "--url", url, "--key", "job", "--wait", "300ms", "--", "true"); code != ExitNotAcquired {
		t.Errorf("--wait 300ms on a held lock: exit %d, want %d\n%s", code, ExitNotAcquired, o)
	}

	// status sees the holder.
	o, code := runCLI(t, nil, "status", "--url", url, "--key", "job", "--json")
	var st stateJSON
	if code != 0 || json.Unmarshal([]byte(o), &st) != nil {
		t.Fatalf("status: exit %d: %s", code, o)
	}
	if !st.Held || st.holder().Owner == "" || st.Backend == "" || st.holder().TTL <= 0 || strings.TrimSpace(token) != jsonNumber(st.Token) {
		t.Errorf("status = %+v, want held with the holder's token %s", st, token)
	}

	// Freeze the server beyond the TTL: the holder loses the lease, its
	// command gets SIGTERM, and distlock exits 70.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := g.Node(0).Pause(ctx); err != nil {
		t.Fatal(err)
	}
	var rest []string
	timeout := time.After(30 * time.Second)
collect:
	for { // until the holder's command exits
		select {
		case l, ok := <-lines:
			if !ok {
				break collect
			}
			rest = append(rest, l)
		case <-timeout:
			t.Fatal("the holder's command did not end after its lease was lost")
		}
	}
	exit := waitExit(t, holder, "its lease was lost")
	if err := g.Node(0).Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if ee, ok := exit.(*exec.ExitError); !ok || ee.ExitCode() != ExitLost {
		t.Errorf("holder exit %v, want %d (lock lost)", exit, ExitLost)
	}
	if len(rest) != 1 || rest[0] != "got-term" {
		t.Errorf("the command was not sent SIGTERM (it printed %q)", rest)
	}

	// Once the server is back the lock is free again.
	if o, code := runCLI(t, nil, "run", "--url", url, "--key", "job", "--wait", "10s", "--", "true"); code != 0 {
		t.Errorf("after the holder's loss: exit %d\n%s", code, o)
	}
}

func jsonNumber(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestRunBackendUnreachable(t *testing.T) {
	o, code := runCLI(t, nil, "run", "--url", "redis://127.0.0.1:1?dial_timeout=500ms", "--key", "k", "--", "true")
	if code != ExitUnavailable {
		t.Errorf("unreachable backend: exit %d, want %d\n%s", code, ExitUnavailable, o)
	}
}

// TestRedisLockedWithoutCommand: a `distlock hold` process keeps the lock
// from other processes until its stdin closes, then frees it; status tells
// held (0) from free (3), and list shows the held lock with its owner and
// token, under its prefix only.
func TestRedisLockedWithoutCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis server")
	}
	url := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis}).URL()
	holder, stdin, line, err := startCLI(t, "hold", "--url", url, "--key", "deploy", "--ttl", "2s")
	f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
	if err != nil || len(f) != 3 || f[0] != "deploy" {
		t.Fatalf("hold printed %q (%v)", line, err)
	}
	time.Sleep(3 * time.Second) // beyond the TTL: renewals keep it
	if o, code := runCLI(t, nil, "run", "--url", url, "--key", "deploy", "--no-wait", "--", "true"); code != ExitNotAcquired {
		t.Errorf("run --no-wait while hold holds the lock: exit %d, want %d\n%s", code, ExitNotAcquired, o)
	}
	o, code := runCLI(t, nil, "status", "--url", url, "--key", "deploy", "--json")
	var st stateJSON
	if code != ExitOK || json.Unmarshal([]byte(o), &st) != nil || st.holder().Owner != f[2] || jsonNumber(st.Token) != f[1] {
		t.Errorf("status of the held lock: exit %d, %s; want 0 and owner %s, token %s", code, o, f[2], f[1])
	}
	if o, code := runCLI(t, nil, "list", "--url", url, "--prefix", "dep", "--json"); code != ExitOK || json.Unmarshal([]byte(o), &st) != nil || st.Key != "deploy" || st.holder().Owner != f[2] {
		t.Errorf("list on redis: exit %d, %q; want 0 and the held lock", code, o)
	}
	if o, code := runCLI(t, nil, "list", "--url", url, "--prefix", "other/"); code != ExitOK || strings.Contains(o, "deploy") {
		t.Errorf("list under another prefix: exit %d, %q; want 0 and nothing", code, o)
	}
	_ = stdin.Close()
	if err := holder.Wait(); err != nil {
		t.Fatalf("hold after its stdin closed: %v, want exit 0", err)
	}
	if o, code := runCLI(t, nil, "status", "--url", url, "--key", "deploy"); code != ExitFree {
		t.Errorf("status after hold ended: exit %d, want %d (free)\n%s", code, ExitFree, o)
	}
	if o, code := runCLI(t, nil, "run", "--url", url, "--key", "deploy", "--no-wait", "--", "true"); code != 0 {
		t.Errorf("run --no-wait after hold ended: exit %d, want 0\n%s", code, o)
	}
}

// TestElectAgainstRedis: two `distlock elect` candidates on one election:
// the second waits while the first leads (and gives up at --wait with
// 75), is elected as soon as the first's command exits (the first
// resigns: no TTL to wait out), with a greater term; status shows the
// leader's value.
func TestElectAgainstRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis server")
	}
	url := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis}).URL()
	first, stdin, line, err := startCLI(t, "elect", "--url", url, "--name", "sched", "--value", "first", "--ttl", "30s", "--",
		"sh", "-c", `echo "term $DISTLOCK_TERM"; read line; exit 4`)
	if err != nil || !strings.HasPrefix(line, "term ") {
		t.Fatalf("the first candidate's command printed %q (%v)", line, err)
	}
	firstTerm := strings.TrimSpace(strings.TrimPrefix(line, "term "))

	if o, code := runCLI(t, nil, "elect", "--url", url, "--name", "sched", "--wait", "300ms", "--", "true"); code != ExitNotAcquired {
		t.Errorf("a second candidate with --wait 300ms while the first leads: exit %d, want %d\n%s", code, ExitNotAcquired, o)
	}
	o, code := runCLI(t, nil, "status", "--url", url, "--key", "sched", "--json")
	var st stateJSON
	if code != ExitOK || json.Unmarshal([]byte(o), &st) != nil || !strings.HasPrefix(st.holder().Owner, "first.") || jsonNumber(st.Token) != firstTerm {
		t.Errorf("status of the election: exit %d, %s; want held by first.* with term %s", code, o, firstTerm)
	}

	second := exec.Command(binary, "elect", "--url", url, "--name", "sched", "--value", "second", "--", "sh", "-c", `echo "term $DISTLOCK_TERM"`)
	out2 := startPiped(t, second)
	time.Sleep(300 * time.Millisecond) // the second campaigns, queued behind the first
	start := time.Now()
	_ = stdin.Close() // the first's command exits 4; distlock resigns
	if err := first.Wait(); err == nil || err.(*exec.ExitError).ExitCode() != 4 {
		t.Errorf("the first candidate: %v, want its command's exit 4", err)
	}
	line, err = bufio.NewReader(out2).ReadString('\n')
	elected := time.Since(start)
	if err != nil || !strings.HasPrefix(line, "term ") {
		t.Fatalf("the second candidate's command printed %q (%v)", line, err)
	}
	if err := second.Wait(); err != nil {
		t.Errorf("the second candidate: %v, want exit 0", err)
	}
	t1, _ := strconv.ParseUint(firstTerm, 10, 64)
	t2, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(line, "term ")), 10, 64)
	if t2 <= t1 {
		t.Errorf("the second leader's term %d is not above the first's %d", t2, t1)
	}
	// The TTL is 30 s: an election this fast means the first resigned.
	if elected > 15*time.Second {
		t.Errorf("the second candidate was elected %v after the first's command exited: the first did not resign", elected)
	}
}

// TestRunSemaphoreAgainstRedis: with -n 2, two `distlock run` commands
// hold permits of one semaphore at once; a third is refused (--no-wait,
// 75) or waits (--wait) until one of them ends, then runs.
func TestRunSemaphoreAgainstRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis server")
	}
	url := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis}).URL()
	var stdins []interface{ Close() error }
	var holders []*exec.Cmd
	for i := range 2 {
		h, in, line, err := startCLI(t, "run", "--url", url, "--key", "pool", "-n", "2", "--no-wait", "--ttl", "2s", "--",
			"sh", "-c", `echo "holding $DISTLOCK_TOKEN"; read line; exit 0`)
		if err != nil || !strings.HasPrefix(line, "holding ") {
			t.Fatalf("holder %d printed %q (%v): it did not get a permit", i, line, err)
		}
		stdins, holders = append(stdins, in), append(holders, h)
	}
	time.Sleep(2500 * time.Millisecond) // beyond the TTL: renewals keep both permits
	if o, code := runCLI(t, nil, "run", "--url", url, "--key", "pool", "-n", "2", "--no-wait", "--", "true"); code != ExitNotAcquired || !strings.Contains(o, "semaphore") {
		t.Errorf("a third -n 2 --no-wait while two hold permits: exit %d, want %d\n%s", code, ExitNotAcquired, o)
	}
	if o, code := runCLI(t, nil, "run", "--url", url, "--key", "pool", "-n", "2", "--wait", "300ms", "--", "true"); code != ExitNotAcquired || !strings.Contains(o, "all 2 permits") {
		t.Errorf("a third -n 2 --wait 300ms while two hold permits: exit %d, want %d\n%s", code, ExitNotAcquired, o)
	}
	_ = stdins[0].Close()
	if err := holders[0].Wait(); err != nil {
		t.Errorf("the first holder: %v, want exit 0", err)
	}
	if o, code := runCLI(t, nil, "run", "--url", url, "--key", "pool", "-n", "2", "--wait", "10s", "--", "true"); code != 0 {
		t.Errorf("a third -n 2 after one holder ended: exit %d, want 0\n%s", code, o)
	}
	_ = stdins[1].Close()
	if err := holders[1].Wait(); err != nil {
		t.Errorf("the second holder: %v, want exit 0", err)
	}
}

// TestRunReadWriteAgainstRedis: two --read commands hold a read-write
// lock together; --write is refused while they hold it (--no-wait, 75)
// and runs once both ended, with a token above every earlier write's; a
// --read meanwhile refused while the writer holds.
func TestRunReadWriteAgainstRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis server")
	}
	runReadWrite(t, sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis}).URL())
}

// TestRunReadWriteAgainstMariaDB: the same on the SQL backend.
func TestRunReadWriteAgainstMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a MariaDB server")
	}
	runReadWrite(t, sandbox.StartT(t, sandbox.Spec{Kind: sandbox.MariaDB}).URL())
}

func runReadWrite(t *testing.T, url string) {
	var stdins []interface{ Close() error }
	var readers []*exec.Cmd
	for i := range 2 {
		r, in, line, err := startCLI(t, "run", "--url", url, "--key", "cfg", "--read", "--no-wait", "--", "sh", "-c", `echo reading; read line; exit 0`)
		if err != nil || line != "reading\n" {
			t.Fatalf("reader %d printed %q (%v): it did not get the read side while another reader holds it", i, line, err)
		}
		stdins, readers = append(stdins, in), append(readers, r)
	}
	if o, code := runCLI(t, nil, "run", "--url", url, "--key", "cfg", "--write", "--no-wait", "--", "true"); code != ExitNotAcquired || !strings.Contains(o, "write side") {
		t.Errorf("--write --no-wait while two readers hold: exit %d, want %d\n%s", code, ExitNotAcquired, o)
	}
	for i, in := range stdins {
		_ = in.Close()
		if err := readers[i].Wait(); err != nil {
			t.Errorf("reader %d: %v, want exit 0", i, err)
		}
	}
	w, win, line, err := startCLI(t, "run", "--url", url, "--key", "cfg", "--write", "--wait", "10s", "--", "sh", "-c", `echo "writing $DISTLOCK_TOKEN"; read line; exit 0`)
	if err != nil || !strings.HasPrefix(line, "writing ") {
		t.Fatalf("the writer printed %q (%v) after both readers ended", line, err)
	}
	if o, code := runCLI(t, nil, "run", "--url", url, "--key", "cfg", "--read", "--no-wait", "--", "true"); code != ExitNotAcquired || !strings.Contains(o, "read side") {
		t.Errorf("--read --no-wait while the writer holds: exit %d, want %d\n%s", code, ExitNotAcquired, o)
	}
	_ = win.Close()
	if err := w.Wait(); err != nil {
		t.Errorf("the writer: %v, want exit 0", err)
	}
	token := strings.TrimSpace(strings.TrimPrefix(line, "writing "))
	o, code := runCLI(t, nil, "run", "--url", url, "--key", "cfg", "--read", "--", "sh", "-c", `echo "token $DISTLOCK_TOKEN"`)
	if code != 0 || !strings.Contains(o, "token "+token) {
		t.Errorf("a reader after the write: exit %d, %q; want the last write's token %s", code, o, token)
	}
}

// startCLI starts the binary with args, its stderr on the test's, and
// returns it, its stdin, and the first line it printed (err: reading it
// failed). The process is killed when the test ends.
func startCLI(t *testing.T, args ...string) (*exec.Cmd, io.WriteCloser, string, error) {
	t.Helper()
	c := exec.Command(binary, args...)
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out := startPiped(t, c)
	line, err := bufio.NewReader(out).ReadString('\n')
	return c, in, line, err
}

// TestElectProclaimAgainstRedis: a value the leader's command proclaims
// through fd 3 is what status reports beside the owner, once acknowledged.
func TestElectProclaimAgainstRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis server")
	}
	url := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis}).URL()
	leader, stdin, line, err := startCLI(t, "elect", "--url", url, "--name", "primary", "--value", "10.0.0.1:5432", "--proclaim", "--",
		"sh", "-c", `echo 10.0.0.1:6432 >&3; read -r ack <&3; echo "ack $ack"; read line; exit 0`)
	if err != nil || strings.TrimSpace(line) != "ack ok" {
		t.Fatalf("the leader's command printed %q (%v), want ack ok", line, err)
	}
	o, code := runCLI(t, nil, "status", "--url", url, "--key", "primary", "--json")
	var st stateJSON
	if code != ExitOK || json.Unmarshal([]byte(o), &st) != nil || st.holder().Value != "10.0.0.1:6432" || !strings.HasPrefix(st.holder().Owner, "10.0.0.1:5432.") {
		t.Errorf("status after the proclamation: exit %d, %s; want value 10.0.0.1:6432 beside owner 10.0.0.1:5432.*", code, o)
	}
	if o, _ := runCLI(t, nil, "status", "--url", url, "--key", "primary"); !strings.Contains(o, "(value 10.0.0.1:6432)") {
		t.Errorf("status text after the proclamation does not show the value: %s", o)
	}
	_ = stdin.Close()
	if err := leader.Wait(); err != nil {
		t.Errorf("the leader: %v", err)
	}
}
