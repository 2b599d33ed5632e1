package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/distlock/distlock/backend"
)

func newStatusCmd() *cobra.Command {
	var o queryOpts
	var key string
	var sem, rw bool
	cmd := &cobra.Command{
		Use:   "status --url URL --key KEY [--semaphore | --rw] [--json] [--timeout 10s]",
		Short: "Show whether a lock is held, by whom, its token, TTL and waiters",
		Long: `Show whether the lock KEY is held, by which owner, its fencing token,
its remaining TTL, and the number of waiters where the store knows it.

With --semaphore, KEY is a semaphore: its grants (owner, permits, token,
TTL) and the permits held in all; with --rw, a read-write lock: its
writer or its readers. Stores that can report them: mem://, Redis (not
Redlock) and etcd; others exit 64.

Exit status: 0 held, 3 free, 64 bad usage, 69 backend unreachable (or
no answer within --timeout), 1 any other error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check("status"); err != nil {
				return err
			}
			if key == "" {
				return exitWith(ExitUsage, fmt.Errorf("status: --key is required"))
			}
			switch {
			case sem && rw:
				return exitWith(ExitUsage, fmt.Errorf("status: --semaphore and --rw exclude each other"))
			case sem:
				return semaphoreStatus(cmd.Context(), cmd.OutOrStdout(), o, key)
			case rw:
				return rwStatus(cmd.Context(), cmd.OutOrStdout(), o, key)
			}
			return status(cmd.Context(), cmd.OutOrStdout(), o, key)
		},
	}
	addQueryFlags(cmd, &o)
	cmd.Flags().StringVar(&key, "key", "", "lock key (required)")
	cmd.Flags().BoolVar(&sem, "semaphore", false, "KEY is a semaphore: show its grants")
	cmd.Flags().BoolVar(&rw, "rw", false, "KEY is a read-write lock: show its writer or readers")
	return cmd
}

// statusJSON is the --json output of status, and of list for each lock.
type statusJSON struct {
	Backend string  `json:"backend"`
	Key     string  `json:"key"`
	Held    bool    `json:"held"`
	Owner   string  `json:"owner,omitempty"`
	Token   uint64  `json:"token"`
	TTL     float64 `json:"ttl_seconds"`
	Waiters int     `json:"waiters"` // -1: the store does not know
}

func newStatusJSON(name string, info backend.Info) statusJSON {
	return statusJSON{Backend: name, Key: info.Key, Held: info.Held, Owner: info.Owner,
		Token: info.Token, TTL: info.TTL.Seconds(), Waiters: info.Waiters}
}

// status prints key's state and exits 0 when it is held, ExitFree when not.
func status(ctx context.Context, w io.Writer, o queryOpts, key string) error {
	qctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	locker, in, err := openAs[backend.Inspector](qctx, o, "status")
	if err != nil {
		return o.unanswered(ctx, qctx, "status", err)
	}
	defer locker.Close()
	info, err := in.Inspect(qctx, key, backend.Exclusive)
	if err != nil {
		return o.unanswered(ctx, qctx, "status", err)
	}
	info.Key = key
	if o.asJSON {
		err = printJSONLine(w, newStatusJSON(locker.Capabilities().Name, info))
	} else {
		printStatus(w, info)
	}
	if err != nil || info.Held {
		return err
	}
	return exitWith(ExitFree, nil)
}

func printStatus(w io.Writer, info backend.Info) {
	if !info.Held {
		fmt.Fprintf(w, "%s: free (last token %d)\n", info.Key, info.Token)
		return
	}
	fmt.Fprintf(w, "%s: held by %s, token %d, expires in %v", info.Key, info.Owner, info.Token, info.TTL.Round(time.Millisecond))
	if info.Waiters >= 0 {
		fmt.Fprintf(w, ", %d waiting", info.Waiters)
	}
	fmt.Fprintln(w)
}

// printJSONLine writes v as one line of JSON.
func printJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
