package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/distlock/distlock"
)

type runOpts struct {
	url, key    string
	ttl, wait   time.Duration
	noWait      bool
	grace       time.Duration
	openTimeout time.Duration
}

func newRunCmd() *cobra.Command {
	var o runOpts
	cmd := &cobra.Command{
		Use:   "run --url URL --key KEY [--ttl 30s] [--wait 5m | --no-wait] -- CMD [ARGS...]",
		Short: "Run a command while holding a lock, like flock(1) across machines",
		Long: `Acquire the lock KEY, run CMD, release the lock.

The lease is renewed while CMD runs. If it is lost, CMD gets SIGTERM and,
after --grace, SIGKILL, and distlock exits with 70. CMD runs in its own
process group; SIGINT, SIGTERM and SIGHUP sent to distlock are passed on
to it, and the lock is released when it exits. CMD sees DISTLOCK_KEY,
DISTLOCK_TOKEN (the fencing token) and DISTLOCK_OWNER in its environment.

Exit status: CMD's own when it ran (128+N if signal N killed it);
64 bad usage, 69 backend unreachable, 70 lock lost, 75 not acquired.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return exitWith(ExitUsage, errors.New("run: no command given (distlock run --url URL --key KEY -- CMD ARGS...)"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return runLocked(cmd.Context(), o, args) },
	}
	cmd.Flags().SetInterspersed(false)
	urlFlag(cmd, &o.url)
	cmd.Flags().StringVar(&o.key, "key", "", "lock key (required)")
	cmd.Flags().DurationVar(&o.ttl, "ttl", 0, "lease TTL: how long the lock outlives a crashed distlock (default: the URL's ttl, else 30s)")
	cmd.Flags().DurationVar(&o.wait, "wait", 0, "give up after waiting this long for the lock (default: wait indefinitely)")
	cmd.Flags().BoolVar(&o.noWait, "no-wait", false, "fail at once (exit 75) if the lock is held elsewhere")
	cmd.Flags().DurationVar(&o.grace, "grace", 10*time.Second, "after a lost lock, time between SIGTERM and SIGKILL to CMD")
	cmd.Flags().DurationVar(&o.openTimeout, "connect-timeout", 30*time.Second, "bound on connecting to the backend")
	return cmd
}

func (o runOpts) check() error {
	if err := needURL(o.url); err != nil {
		return err
	}
	switch {
	case o.key == "":
		return exitWith(ExitUsage, errors.New("run: --key is required"))
	case o.noWait && o.wait != 0:
		return exitWith(ExitUsage, errors.New("run: --wait and --no-wait exclude each other"))
	case o.wait < 0 || o.ttl < 0 || o.grace < 0:
		return exitWith(ExitUsage, errors.New("run: --wait, --ttl and --grace must not be negative"))
	}
	return nil
}

func runLocked(ctx context.Context, o runOpts, args []string) error {
	if err := o.check(); err != nil {
		return err
	}
	octx, cancel := context.WithTimeout(ctx, o.openTimeout)
	defer cancel()
	locker, err := distlock.Open(octx, o.url)
	if err != nil {
		return err
	}
	defer locker.Close()

	lease, err := acquireForRun(ctx, locker, o)
	if err != nil {
		return err
	}
	code, lost := supervise(lease, o.grace, args)
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := lease.Release(rctx); err != nil && !lost {
		fmt.Fprintln(os.Stderr, "distlock: release:", err)
	}
	if lost {
		return exitWith(ExitLost, fmt.Errorf("run: %w; the command was terminated", lease.Err()))
	}
	return exitWith(code, nil)
}

func acquireForRun(ctx context.Context, locker *distlock.Locker, o runOpts) (*distlock.Lease, error) {
	var opts []distlock.Option
	if o.ttl > 0 {
		opts = append(opts, distlock.WithTTL(o.ttl))
	}
	// One attempt first: an unreachable backend fails at once (exit 69)
	// instead of being waited out.
	lease, err := locker.TryAcquire(ctx, o.key, opts...)
	if o.noWait || !errors.Is(err, distlock.ErrNotAcquired) {
		return lease, err
	}
	if o.wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.wait)
		defer cancel()
	}
	lease, err = locker.Acquire(ctx, o.key, opts...)
	if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, distlock.ErrUnavailable) {
		return nil, exitWith(ExitNotAcquired, fmt.Errorf("run: lock %q still held elsewhere after waiting %v", o.key, o.wait))
	}
	return lease, err
}

// supervise runs CMD and waits for it, passing signals on, and terminating
// it if the lease is lost. It returns CMD's exit code and whether the lease
// was lost.
func supervise(lease *distlock.Lease, grace time.Duration, args []string) (int, bool) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(),
		"DISTLOCK_KEY="+lease.Key(),
		"DISTLOCK_TOKEN="+strconv.FormatUint(lease.Token(), 10),
		"DISTLOCK_OWNER="+lease.Owner())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "distlock: run:", err)
		return 127, false
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	group := -cmd.Process.Pid
	lost := false
	var kill <-chan time.Time
	for {
		select {
		case <-exited:
			return exitCode(cmd.ProcessState), lost
		case s := <-sigs:
			_ = syscall.Kill(group, s.(syscall.Signal))
		case <-lease.Done():
			if errors.Is(lease.Err(), distlock.ErrLost) && !lost {
				lost = true
				fmt.Fprintf(os.Stderr, "distlock: %v; sending SIGTERM to the command\n", lease.Err())
				_ = syscall.Kill(group, syscall.SIGTERM)
				kill = time.After(grace)
			}
		case <-kill:
			_ = syscall.Kill(group, syscall.SIGKILL)
		}
	}
}

func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
