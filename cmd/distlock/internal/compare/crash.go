package compare

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/distlock/distlock/internal/measure"
)

// crashRecovery measures how long a waiter needs to get a lock whose holder
// was killed while holding it: a `distlock run` process killed with
// SIGKILL, or the target's own Crash.
func crashRecovery(ctx context.Context, t Target, c Config, r *Result) error {
	key := uniqueKey("crash")
	waiter, err := t.client(ctx, c.TTL)
	if err != nil {
		return err
	}
	defer waiter.Close()

	kill := func(ctx context.Context, key string) (time.Time, error) { return t.Crash(ctx, key, c.TTL) }
	if t.Crash == nil {
		if c.Exe == "" {
			return errors.New("crash-recovery needs the distlock binary to run a holder process")
		}
		kill = func(ctx context.Context, key string) (time.Time, error) {
			return killHolderProcess(ctx, c.Exe, t.urlWithTTL(c.TTL), key, c.TTL)
		}
	}
	rec, err := measure.Recovery(ctx, key, waiter, 4*c.TTL+time.Minute, kill)
	if err != nil {
		return err
	}
	r.add("recovery", "s", rec.Seconds())
	r.add("ttl", "s", c.TTL.Seconds())
	r.add("recovery/ttl", "x", rec.Seconds()/c.TTL.Seconds())
	return nil
}

// killHolderProcess starts `distlock run` holding key, waits until it holds
// the lock, and kills its whole process group with SIGKILL.
func killHolderProcess(ctx context.Context, exe, url, key string, ttl time.Duration) (time.Time, error) {
	// The held command reports in, lets go of our pipes, and exits soon
	// after its distlock parent dies (it runs in its own process group, so
	// the SIGKILL below does not reach it).
	script := `echo distlock-holder-ready; exec >/dev/null 2>&1; while kill -0 "$PPID"; do sleep 0.1; done`
	cmd := exec.Command(exe, "run", "--url", url, "--key", key, "--ttl", ttl.String(), "--", "sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return time.Time{}, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return time.Time{}, fmt.Errorf("starting the holder process: %w", err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "distlock-holder-ready" {
				ready <- true
				return
			}
		}
		ready <- false
	}()
	var ok bool
	select {
	case ok = <-ready:
	case <-time.After(time.Minute):
	case <-ctx.Done():
	}
	killed := time.Now()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
	if !ok {
		return time.Time{}, fmt.Errorf("the holder process never held the lock: %s", strings.TrimSpace(stderr.String()))
	}
	return killed, nil
}
