package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"

	"github.com/spf13/cobra"

	"github.com/distlock/distlock"
)

func newReleaseCmd() *cobra.Command {
	var o queryOpts
	var key, by, reason string
	var force bool
	cmd := &cobra.Command{
		Use:   "release --url URL --key KEY --force [--by WHO] [--reason TEXT] [--json] [--timeout 10s]",
		Short: "Free a lock whoever holds it (an operator's last resort; needs --force)",
		Long: `Free the lock KEY in the store, whoever holds it: the last resort for a
holder that is stuck (alive and renewing, but never releasing). The
holder is not told: its next renewal finds the lock gone and its lease
ends as lost (distlock run then stops its command and exits 70). Until
then it may still act as the holder, so the resource it protects must
check fencing tokens: the next holder's token is greater than the freed
one's, on every store.

--force is required. --by names who frees it (default: USER@HOST:PID) and
--reason says why; both go to the log line (at warn), and where the
store keeps a record (mem, Redis, etcd, ZooKeeper) the next status
shows "forced free by WHO at T". On SQL stores the holder's session is
ended (KILL CONNECTION, pg_terminate_backend), which frees every lock
that session held.

Exit status: 0 freed, 3 the lock was free, 64 bad usage or a store that
cannot free another client's lock, 69 backend unreachable (or no answer
within --timeout), 1 any other error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check("release"); err != nil {
				return err
			}
			if key == "" {
				return exitWith(ExitUsage, errors.New("release: --key is required"))
			}
			if !force {
				return exitWith(ExitUsage, fmt.Errorf("release: refusing to free %q without --force: it frees the lock whoever holds it, and the holder learns only at its next renewal", key))
			}
			if by == "" {
				by = operator()
			}
			return forceRelease(cmd.Context(), cmd, o, key, by, reason)
		},
	}
	addQueryFlags(cmd, &o)
	cmd.Flags().StringVar(&key, "key", "", "lock key (required)")
	cmd.Flags().BoolVar(&force, "force", false, "free the lock whoever holds it (required)")
	cmd.Flags().StringVar(&by, "by", "", "who frees it, for the log and the store's record (default USER@HOST:PID)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the log and the store's record")
	return cmd
}

// operator names the person or process running the command:
// USER@HOST:PID.
func operator() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); name == "" && err == nil {
		name = u.Username
	}
	if name == "" {
		name = "unknown"
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s@%s:%d", name, host, os.Getpid())
}

func forceRelease(ctx context.Context, cmd *cobra.Command, o queryOpts, key, by, reason string) error {
	qctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	locker, err := distlock.Open(qctx, o.url, distlock.WithLogger(logger))
	if err != nil {
		return o.unanswered(ctx, qctx, "release", err)
	}
	defer locker.Close()
	info, err := locker.ForceRelease(qctx, key, by, reason)
	if errors.Is(err, distlock.ErrNotHeld) {
		if o.asJSON {
			if err := printJSONLine(cmd.OutOrStdout(), freedJSON(locker.Capabilities().Name, key, by, reason, info, false)); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(cmd.OutOrStdout(), "%s: free, nothing to release\n", key)
		}
		return exitWith(ExitFree, nil)
	}
	if err != nil {
		return o.unanswered(ctx, qctx, "release", reword("release: ", err, ""))
	}
	if o.asJSON {
		return printJSONLine(cmd.OutOrStdout(), freedJSON(locker.Capabilities().Name, key, by, reason, info, true))
	}
	_, err = fmt.Fprintln(cmd.OutOrStdout(), freedText(key, by, info))
	return err
}
