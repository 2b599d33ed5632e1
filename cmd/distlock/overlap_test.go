package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock/sandbox"
)

// TestRunKillsCommandBeforeValidityEnds: a holder whose store stops
// answering must not let CMD run past the lease's validity, even when CMD
// ignores SIGTERM and --grace is long: the next holder could hold the lock
// by then (issue 12, item 10; before, CMD ran --grace past the loss).
func TestRunKillsCommandBeforeValidityEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis server")
	}
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	const ttl = 2 * time.Second
	beat := filepath.Join(t.TempDir(), "beat")
	holder := exec.Command(binary, "run", "--url", g.URL(), "--key", "overlap", "--ttl", ttl.String(), "--grace", "10s", "--",
		"sh", "-c", `trap '' TERM; echo ready; while :; do date +%s%N > "$0.tmp" && mv "$0.tmp" "$0"; sleep 0.02; done`, beat)
	stdout := startPiped(t, holder)
	if l, _ := bufio.NewReader(stdout).ReadString('\n'); l != "ready\n" {
		t.Fatalf("holder said %q", l)
	}
	time.Sleep(ttl) // a few renewals
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	paused := time.Now()
	if err := g.Node(0).Pause(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = g.Node(0).Resume(ctx) }()
	// The store's copy of the lock expires by paused+ttl at the latest:
	// nothing renewed it after the pause.
	validityEnd := paused.Add(ttl)
	exit := waitExit(t, holder, "its store stopped answering")
	var ee *exec.ExitError
	if !errors.As(exit, &ee) || ee.ExitCode() != ExitLost {
		t.Errorf("holder exit %v, want %d", exit, ExitLost)
	}
	raw, err := os.ReadFile(beat)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		t.Fatalf("heartbeat %q: %v", raw, err)
	}
	if last := time.Unix(0, ns); !last.Before(validityEnd) {
		t.Errorf("the command still ran %v after the lease's validity ended", last.Sub(validityEnd))
	}
}

// TestRunCommandDiesWithDistlock: when distlock is SIGKILLed, CMD (its
// direct child) is killed too instead of running on without the lock
// (issue 12, item 10).
func TestRunCommandDiesWithDistlock(t *testing.T) {
	diesWithDistlock(t, `echo $$; exec sleep 600`)
}

// TestRunCommandGroupDiesWithDistlock: when distlock is SIGKILLed, the
// processes CMD started in its group die too (a shell's background job
// here), not only CMD itself: none of them may run on without the lock.
func TestRunCommandGroupDiesWithDistlock(t *testing.T) {
	diesWithDistlock(t, `sleep 600 & echo $!; wait`)
}

// diesWithDistlock runs script under `distlock run`; the script prints the
// pid of a process that must die with distlock. It SIGKILLs distlock and
// waits (5 s at most) for that process to go.
func diesWithDistlock(t *testing.T, script string) {
	holder := exec.Command(binary, "run", "--url", "mem://", "--key", "k", "--", "sh", "-c", script)
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		_ = holder.Process.Kill()
		_ = holder.Wait()
		t.Fatalf("holder said %q", line)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	_ = holder.Process.Kill()
	_ = holder.Wait()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if !alive(pid) {
			return
		}
	}
	t.Errorf("pid %d still runs 5s after distlock was killed", pid)
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
