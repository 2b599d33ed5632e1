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

// status prints key's state and exits 0 when it is held, ExitFree when not.
func status(ctx context.Context, w io.Writer, o queryOpts, key string) error {
	qctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	locker, in, err := openInspector(qctx, o, "status")
	if err != nil {
		return o.unanswered(ctx, qctx, "status", err)
	}
	defer locker.Close()
	info, err := in.Inspect(qctx, key, backend.Exclusive)
	if err != nil {
		return o.unanswered(ctx, qctx, "status", err)
	}
	info.Key = key
	return o.show(w, lockState(locker.Capabilities().Name, info, time.Now()))
}

// show prints st, as JSON with --json; it exits 0 when st is held,
// ExitFree when not.
func (o queryOpts) show(w io.Writer, st state) error {
	var err error
	if o.asJSON {
		err = printJSONLine(w, st.json())
	} else {
		err = st.print(w)
	}
	if err != nil || st.held() {
		return err
	}
	return exitWith(ExitFree, nil)
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
