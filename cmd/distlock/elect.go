package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/distlock/distlock"
)

type electOpts struct {
	url, name, value string
	ttl, wait, grace time.Duration
	openTimeout      time.Duration
	proclaim         bool
}

func newElectCmd() *cobra.Command {
	var o electOpts
	cmd := &cobra.Command{
		Use:   "elect --url URL --name NAME [--value V] [--proclaim] [--ttl 30s] [--wait 5m] [--grace 10s] -- CMD [ARGS...]",
		Short: "Campaign in a leader election and run a command while leader",
		Long: `Campaign in the election NAME and, once elected, run CMD for as long as
this candidate leads, as a supervisor of a singleton job would.

The election is the lock NAME (do not use NAME as a lock of its own);
its leader is the holder, its term the holder's fencing token. The
campaign waits until elected (--wait bounds it: exit 75 beyond). While
CMD runs the leadership is renewed; if it is lost (renewals failing past
--grace, the store granting it elsewhere) CMD's process group is
terminated exactly as 'distlock run' does and distlock exits 70. When CMD
exits, distlock resigns at once, so the next candidate is elected without
waiting for the TTL, and exits with CMD's status.

--value is what 'distlock status --key NAME' and other candidates report
as the leader (default: host name and process id); two candidates may
share a value and are still distinct. CMD sees DISTLOCK_ELECTION,
DISTLOCK_VALUE, DISTLOCK_TERM (the term, a fencing token), and
DISTLOCK_KEY, DISTLOCK_TOKEN, DISTLOCK_OWNER in its environment.

With --proclaim, CMD may change the leader's value while it leads, in the
same term: each line it writes to fd 3 (DISTLOCK_PROCLAIM_FD=3) is
proclaimed, and distlock answers on the same fd with "ok" or "error:
REASON", one line each, once the store has answered (stores without
values answer an error naming them; see docs/primitives.md):

    echo "$NEW_ADDR" >&3 && read -r ack <&3

To keep a job running under whichever replica leads, run 'distlock elect'
in a loop on every replica (a systemd unit with Restart=always): each
exit is a resignation, and the next campaign queues behind the others.

Exit status: CMD's own when it ran (128+N if signal N killed it);
64 bad usage, 69 backend unreachable, 70 leadership lost, 75 not elected
within --wait.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return exitWith(ExitUsage, errors.New("elect: no command given (distlock elect --url URL --name NAME -- CMD ARGS...)"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return elect(cmd.Context(), o, args) },
	}
	cmd.Flags().SetInterspersed(false)
	urlFlag(cmd, &o.url)
	cmd.Flags().StringVar(&o.name, "name", "", "election name: the lock the candidates compete for (required)")
	cmd.Flags().StringVar(&o.value, "value", "", "this candidate's value, reported as the leader (default HOST:PID)")
	cmd.Flags().BoolVar(&o.proclaim, "proclaim", false, "let CMD change the leader's value: lines it writes to fd 3 are proclaimed, each answered on fd 3 with ok or error: REASON")
	cmd.Flags().DurationVar(&o.ttl, "ttl", 0, "leadership TTL: how long a crashed leader stays in office (default: the URL's ttl, else 30s)")
	cmd.Flags().DurationVar(&o.wait, "wait", 0, "give up after campaigning this long (exit 75; default: campaign indefinitely)")
	cmd.Flags().DurationVar(&o.grace, "grace", 10*time.Second, "when renewals fail, SIGTERM to CMD this long before the leadership's validity ends, SIGKILL at its end (at most a third of the TTL)")
	connectTimeoutFlag(cmd, &o.openTimeout)
	return cmd
}

func (o *electOpts) check() error {
	if err := needURL(o.url); err != nil {
		return err
	}
	if o.value == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "host"
		}
		o.value = fmt.Sprintf("%s:%d", host, os.Getpid())
		if len(o.value) > distlock.MaxCandidateValueLen {
			o.value = o.value[len(o.value)-distlock.MaxCandidateValueLen:]
		}
	}
	switch {
	case o.name == "":
		return exitWith(ExitUsage, errors.New("elect: --name is required"))
	case o.wait < 0 || o.ttl < 0 || o.grace < 0:
		return exitWith(ExitUsage, errors.New("elect: --wait, --ttl and --grace must not be negative"))
	case o.openTimeout <= 0:
		return exitWith(ExitUsage, errors.New("elect: --connect-timeout must be positive"))
	}
	if err := distlock.CheckCandidateValue(o.value); err != nil {
		return exitWith(ExitUsage, fmt.Errorf("elect: --value: %w", err))
	}
	return nil
}

func elect(ctx context.Context, o electOpts, args []string) error {
	if err := o.check(); err != nil {
		return err
	}
	octx, ocancel := context.WithTimeout(ctx, o.openTimeout)
	locker, err := distlock.Open(octx, o.url, distlock.WithLogger(logger))
	ocancel()
	if err != nil {
		return err
	}
	defer locker.Close()
	var eopts []distlock.ElectionOption
	if o.ttl > 0 {
		eopts = append(eopts, distlock.WithLeaderTTL(o.ttl))
	}
	el, err := locker.Election(o.name, eopts...)
	if err != nil {
		return err
	}
	cctx := ctx
	if o.wait > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, o.wait)
		defer cancel()
	}
	ld, err := el.Campaign(cctx, o.value)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && !errors.Is(err, distlock.ErrUnavailable) {
			return exitWith(ExitNotAcquired, fmt.Errorf("elect: not elected leader of %q within --wait %v", o.name, o.wait))
		}
		return err
	}
	env := []string{
		"DISTLOCK_ELECTION=" + o.name,
		"DISTLOCK_VALUE=" + o.value,
		"DISTLOCK_TERM=" + strconv.FormatUint(ld.Term(), 10),
	}
	var extra []*os.File
	if o.proclaim {
		child, stop, err := serveProclaims(ld)
		if err != nil {
			_ = ld.Resign(context.Background())
			return err
		}
		defer stop()
		extra, env = []*os.File{child}, append(env, proclaimFDEnv+"=3")
	}
	code, terminated := supervise(ld.Lease(), o.grace, args, env, extra)
	return afterCommand("elect", "resign", code, terminated, ld.Err(),
		fmt.Errorf("the leadership of %q was not renewed in time", o.name), ld.Resign)
}

// proclaimFDEnv names, in CMD's environment, the fd on which it proclaims
// (elect --proclaim).
const proclaimFDEnv = "DISTLOCK_PROCLAIM_FD"

// serveProclaims makes the socket pair of elect --proclaim: child becomes
// CMD's fd 3; each line read on the other end is proclaimed and answered
// "ok" or "error: REASON". stop ends it (after CMD has exited).
func serveProclaims(ld *distlock.Leadership) (child *os.File, stop func(), err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("elect: --proclaim: socket pair: %w", err)
	}
	// Distlock's end is non-blocking, so that stop's Close ends a read
	// still waiting (a child of CMD that kept fd 3 open).
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		return nil, nil, fmt.Errorf("elect: --proclaim: %w", err)
	}
	own, child := os.NewFile(uintptr(fds[0]), "proclaim"), os.NewFile(uintptr(fds[1]), "proclaim")
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(own)
		for sc.Scan() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := ld.Proclaim(ctx, strings.TrimSuffix(sc.Text(), "\r"))
			cancel()
			reply := "ok\n"
			if err != nil {
				reply = "error: " + strings.TrimPrefix(err.Error(), "distlock: ") + "\n"
				fmt.Fprintln(os.Stderr, "distlock:", err)
			}
			if _, err := io.WriteString(own, reply); err != nil {
				return
			}
		}
	}()
	return child, func() { _ = own.Close(); <-done }, nil
}
