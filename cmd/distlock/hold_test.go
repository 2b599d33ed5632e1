package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
)

// The mem:// store lives in one process, so a second distlock process
// cannot see a lock the first holds: the tests that check the lock itself
// call hold in this process, with a store name of their own; those that
// drive the binary check its output and exit status.

// startHold runs hold on url's key "job" in the background and returns
// the line it printed, a func closing its stdin, and its result.
func startHold(t *testing.T, ctx context.Context, url string, ttl time.Duration) (line string, closeStdin func(), done <-chan error) {
	t.Helper()
	return startHoldAs(t, ctx, lockOpts{url: url, key: "job", ttl: ttl, openTimeout: 10 * time.Second})
}

// startHoldAs runs hold with o in the background, as startHold does.
func startHoldAs(t *testing.T, ctx context.Context, o lockOpts) (line string, closeStdin func(), done <-chan error) {
	t.Helper()
	eof := make(chan struct{})
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pr.Close() })
	res := make(chan error, 1)
	go func() { res <- hold(ctx, o, false, eof, pw); _ = pw.Close() }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("hold printed %q: %v (its result: %v)", line, err, <-res)
	}
	return line, sync.OnceFunc(func() { close(eof) }), res
}

// heldElsewhere reports whether another client is refused key.
func heldElsewhere(t *testing.T, l *distlock.Locker, key string) bool {
	t.Helper()
	le, err := l.TryAcquire(context.Background(), key)
	if err == nil {
		_ = le.Release(context.Background())
		return false
	}
	if !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire(%q): %v", key, err)
	}
	return true
}

func TestHoldUntilStdinCloses(t *testing.T) {
	const url = "mem://hold-stdin"
	line, closeStdin, done := startHold(t, context.Background(), url, 0)
	defer closeStdin()
	f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
	if len(f) != 3 || f[0] != "job" || f[1] != "1" || !ownerPattern.MatchString(f[2]) {
		t.Errorf("hold printed %q, want key, token and owner separated by tabs", line)
	}
	other := openMem(t, url)
	if !heldElsewhere(t, other, "job") {
		t.Fatal("the lock hold printed is free")
	}
	closeStdin()
	if err := <-done; err != nil {
		t.Fatalf("hold after stdin closed: %v, want nil (exit 0)", err)
	}
	if heldElsewhere(t, other, "job") {
		t.Error("the lock is still held after hold returned")
	}
}

func TestHoldUntilSignal(t *testing.T) {
	const url = "mem://hold-signal"
	ctx, cancel := context.WithCancel(context.Background()) // main's ctx: SIGINT, SIGTERM
	defer cancel()
	_, closeStdin, done := startHold(t, ctx, url, 0)
	defer closeStdin()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("hold after a signal: %v, want nil (exit 0)", err)
	}
	if heldElsewhere(t, openMem(t, url), "job") {
		t.Error("the lock is still held after hold returned")
	}
}

func TestHoldLeaseLost(t *testing.T) {
	const url = "mem://hold-lost"
	_, closeStdin, done := startHold(t, context.Background(), url, 300*time.Millisecond)
	defer closeStdin()
	memlock.Named("hold-lost").Delete("job") // behind the holder's back
	select {
	case err := <-done:
		if code := classify(err); code != ExitLost || !strings.Contains(err.Error(), "lost") {
			t.Errorf("hold after its lock was deleted: %v (exit %d), want exit %d saying it was lost", err, code, ExitLost)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("hold did not notice its lock was deleted")
	}
}

func TestHoldGivesUpWaitingAtEOF(t *testing.T) {
	const url = "mem://hold-wait"
	other := openMem(t, url)
	le, err := other.TryAcquire(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = le.Release(context.Background()) }()
	eof := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- hold(context.Background(), lockOpts{url: url, key: "job", openTimeout: 10 * time.Second}, false, eof, io.Discard)
	}()
	time.Sleep(100 * time.Millisecond) // waiting by now, most likely; either way it must give up
	close(eof)
	select {
	case err := <-done:
		if code := classify(err); code != ExitNotAcquired || !strings.Contains(err.Error(), "stdin closed") {
			t.Errorf("hold whose stdin closed while waiting: %v (exit %d), want exit %d", err, code, ExitNotAcquired)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("hold kept waiting after its stdin closed")
	}
}

// TestHoldBinary drives the binary: the JSON line, then exit 0 once stdin
// closes, or on SIGTERM.
func TestHoldBinary(t *testing.T) {
	for _, end := range []string{"stdin", "SIGTERM"} {
		t.Run(end, func(t *testing.T) {
			cmd := exec.Command(binary, "hold", "--url", "mem://", "--key", "deploy/prod", "--json")
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var waitErr error
			waited := make(chan struct{})
			wait := sync.OnceFunc(func() { go func() { waitErr = cmd.Wait(); close(waited) }() })
			t.Cleanup(func() { _ = cmd.Process.Kill(); wait(); <-waited })
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				t.Fatalf("hold printed %q: %v", line, err)
			}
			var h heldJSON
			if err := json.Unmarshal([]byte(line), &h); err != nil || h.Key != "deploy/prod" || h.Token != 1 || !ownerPattern.MatchString(h.Owner) || h.Backend != "mem" {
				t.Errorf("hold --json printed %q (%v)", line, err)
			}
			if end == "stdin" {
				_ = stdin.Close()
			} else {
				_ = cmd.Process.Signal(syscall.SIGTERM)
			}
			wait()
			select {
			case <-waited:
				if waitErr != nil {
					t.Errorf("hold ended by %s: %v, want exit 0", end, waitErr)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("hold did not end after %s", end)
			}
		})
	}
}
