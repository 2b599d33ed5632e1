package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/distlock/distlock"
)

type runOpts struct {
	lockOpts
	grace   time.Duration
	permits int  // -n: a semaphore of this many permits instead of a lock
	sem     bool // -n was given
	read    bool // --read: the read side of a read-write lock
	write   bool // --write: its write side
}

func newRunCmd() *cobra.Command {
	var o runOpts
	cmd := &cobra.Command{
		Use:   "run --url URL --key KEY [-n N | --read | --write] [--ttl 30s] [--wait 5m | --no-wait] -- CMD [ARGS...]",
		Short: "Run a command while holding a lock, like flock(1) across machines",
		Long: `Acquire the lock KEY, run CMD, release the lock.

The lease is renewed while CMD runs. CMD never runs past the lease's
validity: when renewals fail and the validity left falls to --grace, CMD's
process group gets SIGTERM, and SIGKILL just before the validity ends (at
once if the lease is lost); distlock then exits with 70. --grace is capped
at a third of the TTL. CMD runs in its own process group and is killed if
distlock dies (Linux); SIGINT, SIGTERM and SIGHUP sent to distlock are
passed on to it, and the lock is released when it exits. CMD sees DISTLOCK_KEY,
DISTLOCK_TOKEN (the fencing token) and DISTLOCK_OWNER in its environment.

With -n N, KEY is a counting semaphore of N permits instead of a lock
(as consul lock -n): up to N commands run at once across every process
using KEY with -n N, each holding one permit, renewed and supervised as a
lock is. Every process should give the same N (a process with a lower N
waits until the permits held fit it). Stores without a semaphore refuse
-n (exit 64). CMD also sees DISTLOCK_PERMITS (N).

With --read or --write, KEY is a read-write lock: many --read commands
run together, a --write command runs alone, and a waiting --write keeps
new --read commands out, so writers are not starved. A --read command's
DISTLOCK_TOKEN is the last writer's token. Stores without read-write
locks refuse them (exit 64). A read-write lock named KEY and a lock named
KEY never meet.

Exit status: CMD's own when it ran (128+N if signal N killed it);
64 bad usage, 69 backend unreachable, 70 lock lost, 75 not acquired.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return exitWith(ExitUsage, errors.New("run: no command given (distlock run --url URL --key KEY -- CMD ARGS...; to hold a lock without a command: distlock hold)"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.sem = cmd.Flags().Changed("limit")
			return runLocked(cmd.Context(), o, args)
		},
	}
	cmd.Flags().SetInterspersed(false)
	addLockFlags(cmd, &o.lockOpts)
	cmd.Flags().BoolVar(&o.read, "read", false, "take the read side of the read-write lock KEY: many readers run together")
	cmd.Flags().BoolVar(&o.write, "write", false, "take the write side of the read-write lock KEY: one writer, no readers")
	cmd.Flags().IntVarP(&o.permits, "limit", "n", 0, "treat KEY as a semaphore of N permits: up to N commands run at once (default: a lock)")
	cmd.Flags().DurationVar(&o.grace, "grace", 10*time.Second, "when renewals fail, SIGTERM to CMD this long before the lease's validity ends, SIGKILL at its end (at most a third of the TTL)")
	return cmd
}

func (o runOpts) check() error {
	if err := o.lockOpts.check("run"); err != nil {
		return err
	}
	if o.grace < 0 {
		return exitWith(ExitUsage, errors.New("run: --grace must not be negative"))
	}
	if (o.read && o.write) || (o.sem && (o.read || o.write)) {
		return exitWith(ExitUsage, errors.New("run: -n, --read and --write exclude each other"))
	}
	if o.sem && len(o.owner) > distlock.MaxCandidateValueLen {
		return exitWith(ExitUsage, fmt.Errorf("run: --owner with -n labels the permits, and the library adds a suffix of each grant's own: at most %d bytes, got %d", distlock.MaxCandidateValueLen, len(o.owner)))
	}
	if o.sem && (o.permits < 1 || o.permits > distlock.MaxSemaphoreLimit) {
		return exitWith(ExitUsage, fmt.Errorf("run: -n must be 1 to %d permits, got %d", distlock.MaxSemaphoreLimit, o.permits))
	}
	return nil
}

func runLocked(ctx context.Context, o runOpts, args []string) error {
	if err := o.check(); err != nil {
		return err
	}
	locker, err := o.open(ctx)
	if err != nil {
		return err
	}
	defer locker.Close()

	var lease *distlock.Lease
	var env []string
	if o.sem {
		lease, err = o.acquirePermit(ctx, locker, o.permits, "run")
		env = []string{"DISTLOCK_PERMITS=" + strconv.Itoa(o.permits)}
	} else if o.read || o.write {
		lease, err = o.acquireRW(ctx, locker, o.write, "run")
	} else {
		lease, err = o.acquire(ctx, locker, "run")
	}
	if err != nil {
		return err
	}
	code, terminated := supervise(lease, o.grace, args, env, nil)
	return afterCommand("run", "release", code, terminated, lease.Err(),
		fmt.Errorf("the lease on %q was not renewed in time", o.key), lease.Release)
}

// afterCommand ends run and elect once CMD has run (supervise: its exit
// code, and whether it was terminated): it gives the lease back with end
// (Release, Resign: giveBack names it), within 10 s, reporting a failure
// unless CMD was terminated, and returns CMD's exit, or, when CMD was
// terminated, ExitLost with cause (what ended the lease, or notRenewed if
// it says nothing).
func afterCommand(name, giveBack string, code int, terminated bool, cause, notRenewed error, end func(context.Context) error) error {
	if cause == nil {
		cause = notRenewed
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := end(rctx); err != nil && !terminated {
		fmt.Fprintln(os.Stderr, "distlock: "+giveBack+":", err)
	}
	if terminated {
		return exitWith(ExitLost, reword(name+": ", cause, "; the command was terminated"))
	}
	return exitWith(code, nil)
}

// supervise runs CMD and waits for it, passing signals on. CMD must not
// run past the lease's validity (Lease.Deadline): when the validity left
// falls to grace (renewals failing), CMD's process group gets SIGTERM, and
// SIGKILL a margin before the validity ends, or at once when the lease is
// lost. A margin ahead of each, since the deadline can move earlier (a
// backend reporting lost contact) and is re-read at least every poll.
// grace is capped at a third of the validity the lease had when CMD
// started, so renewals that succeed (every third of the TTL) never let it
// get that close. env is added to CMD's environment. CMD's process group dies with distlock (on Linux: a
// guard process, see guard_linux.go). It returns
// CMD's exit code and whether CMD was terminated for the lease.
func supervise(lease *distlock.Lease, grace time.Duration, args, env []string, extra []*os.File) (int, bool) {
	validity := time.Until(lease.Deadline())
	margin := min(validity/20, 250*time.Millisecond)
	grace = min(grace, validity/3)
	poll := min(max(validity/20, 10*time.Millisecond), 250*time.Millisecond)

	prog, argv := guarded(args)
	cmd := exec.Command(prog, argv...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(),
		"DISTLOCK_KEY="+lease.Key(),
		"DISTLOCK_TOKEN="+strconv.FormatUint(lease.Token(), 10),
		"DISTLOCK_OWNER="+lease.Owner())
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = childAttr()
	cmd.ExtraFiles = extra // fds 3, 4, ... in CMD; closed here once it started
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	// Pdeathsig fires when the thread that started CMD ends, not the
	// process: keep this goroutine on its thread until CMD is reaped.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err := cmd.Start()
	for _, f := range extra {
		_ = f.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "distlock: run:", err)
		return 127, false
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	group := -cmd.Process.Pid
	terminated, termSent, killSent := false, false, false
	kill := func(why string) {
		if !killSent {
			killSent, terminated = true, true
			fmt.Fprintf(os.Stderr, "distlock: %s; sending SIGKILL to the command\n", why)
			_ = syscall.Kill(group, syscall.SIGKILL)
		}
	}
	done := lease.Done()
	timer := time.NewTimer(poll)
	defer timer.Stop()
	for {
		select {
		case <-exited:
			return exitCode(cmd.ProcessState), terminated
		case s := <-sigs:
			_ = syscall.Kill(group, s.(syscall.Signal))
		case <-done:
			done = nil
			if errors.Is(lease.Err(), distlock.ErrLost) {
				kill(strings.TrimPrefix(lease.Err().Error(), "distlock: "))
			}
		case <-timer.C:
		}
		deadline := lease.Deadline()
		left := time.Until(deadline)
		if lease.Err() == nil && !killSent && left <= margin {
			kill(fmt.Sprintf("the lease on %q was not renewed and its validity ends in %v", lease.Key(), left.Round(time.Millisecond)))
		}
		if lease.Err() == nil && !termSent && !killSent && left <= grace+margin {
			termSent, terminated = true, true
			fmt.Fprintf(os.Stderr, "distlock: the lease on %q was not renewed and its validity ends in %v; sending SIGTERM to the command (SIGKILL %v before the validity ends)\n",
				lease.Key(), left.Round(time.Millisecond), margin)
			_ = syscall.Kill(group, syscall.SIGTERM)
		}
		next := poll
		if !termSent {
			next = min(next, time.Until(deadline.Add(-grace-margin)))
		}
		if !killSent {
			next = min(next, time.Until(deadline.Add(-margin)))
		}
		timer.Reset(max(next, time.Millisecond))
	}
}

func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
