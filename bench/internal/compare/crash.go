package compare

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/bench/internal/measure"
)

// holderEnv, in a process's environment, makes it a crash-recovery
// holder (see [HolderMain]); its value is a holderSpec in JSON. The URL
// travels in the environment, not in the arguments, where ps would show
// its password.
const holderEnv = "DISTLOCK_COMPARE_HOLDER"

// holderReady is the line a holder prints once it holds the lock.
const holderReady = "distlock-holder-ready"

// holderSpec is what a holder process takes: the engine's own minimal
// arguments, not a command line.
type holderSpec struct {
	URL string        `json:"url"`
	Key string        `json:"key"`
	TTL time.Duration `json:"ttl"`
}

// HolderMain makes this process a crash-recovery holder when the engine
// started it as one, and never returns then; otherwise it returns at once.
// A program that runs crash-recovery on a store in another process calls
// it first thing in main (and in TestMain, when its tests run the
// workload with the test binary as [Config.Exe]).
//
// A holder opens the URL, takes the key, prints a line saying so on
// stdout, and then waits for stdin to close (the engine gone); the engine
// kills it with SIGKILL while it holds the lock.
func HolderMain() {
	raw, ok := os.LookupEnv(holderEnv)
	if !ok {
		return
	}
	var spec holderSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "crash-recovery holder: %s: %v\n", holderEnv, err)
		os.Exit(2)
	}
	if err := hold(spec, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "crash-recovery holder:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// hold takes spec.Key, says so on out, and returns when in closes.
func hold(spec holderSpec, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := distlock.Open(ctx, spec.URL, distlock.WithDefaultTTL(spec.TTL))
	if err != nil {
		return err
	}
	defer l.Close()
	lease, err := l.Acquire(ctx, spec.Key)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(out, holderReady); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, in)
	// The engine is gone without killing us: let the lock go.
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	return lease.Release(rctx)
}

// crashRecovery measures how long a waiter needs to get a lock whose holder
// was killed while holding it: a holder process (see [HolderMain]) killed
// with SIGKILL, or the target's own Crash.
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
			return errors.New("crash-recovery needs Config.Exe, a program calling compare.HolderMain, to run a holder process")
		}
		spec := holderSpec{URL: t.urlWithTTL(c.TTL), Key: key, TTL: c.TTL}
		kill = func(ctx context.Context, key string) (time.Time, error) {
			spec.Key = key
			return killHolderProcess(ctx, c.Exe, spec)
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

// killHolderProcess starts exe as a holder of spec.Key, waits until it
// holds the lock, and kills it with SIGKILL.
func killHolderProcess(ctx context.Context, exe string, spec holderSpec) (time.Time, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return time.Time{}, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), holderEnv+"="+string(raw))
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe() // closed by Wait: a holder we fail to kill exits
	if err != nil {
		return time.Time{}, err
	}
	defer stdin.Close()
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
			if sc.Text() == holderReady {
				ready <- true
				_, _ = io.Copy(io.Discard, out)
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
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if !ok {
		return time.Time{}, fmt.Errorf("the holder process never held the lock: %s", strings.TrimSpace(stderr.String()))
	}
	return killed, nil
}
