package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

func newStatusCmd() *cobra.Command {
	var url, key string
	var asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status --url URL --key KEY [--json]",
		Short: "Show whether a lock is held, by whom, its token, TTL and waiters",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needURL(url); err != nil {
				return err
			}
			if key == "" {
				return exitWith(ExitUsage, fmt.Errorf("status: --key is required"))
			}
			if timeout <= 0 {
				return exitWith(ExitUsage, fmt.Errorf("status: --connect-timeout must be positive"))
			}
			return status(cmd.Context(), cmd.OutOrStdout(), url, key, asJSON, timeout)
		},
	}
	urlFlag(cmd, &url)
	cmd.Flags().StringVar(&key, "key", "", "lock key (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	connectTimeoutFlag(cmd, &timeout)
	return cmd
}

// statusJSON is the --json output.
type statusJSON struct {
	Backend string  `json:"backend"`
	Key     string  `json:"key"`
	Held    bool    `json:"held"`
	Owner   string  `json:"owner,omitempty"`
	Token   uint64  `json:"token"`
	TTL     float64 `json:"ttl_seconds"`
	Waiters int     `json:"waiters"` // -1: the store does not know
}

func status(ctx context.Context, w io.Writer, url, key string, asJSON bool, timeout time.Duration) error {
	octx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	locker, err := distlock.Open(octx, url, distlock.WithLogger(logger))
	if err != nil {
		return err
	}
	defer locker.Close()
	in, ok := locker.Driver().(backend.Inspector)
	if !ok {
		return fmt.Errorf("status: %w: the %s backend cannot inspect locks", distlock.ErrUnsupported, locker.Capabilities().Name)
	}
	info, err := in.Inspect(octx, key)
	if err != nil {
		if octx.Err() != nil && ctx.Err() == nil && !errors.Is(err, distlock.ErrUnavailable) {
			return exitWith(ExitUnavailable, fmt.Errorf("status: the backend did not answer within --connect-timeout %v: %w", timeout, err))
		}
		return err
	}
	out := statusJSON{Backend: locker.Capabilities().Name, Key: key, Held: info.Held, Owner: info.Owner,
		Token: info.Token, TTL: info.TTL.Seconds(), Waiters: info.Waiters}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if !info.Held {
		fmt.Fprintf(w, "%s: free (last token %d)\n", key, info.Token)
		return nil
	}
	fmt.Fprintf(w, "%s: held by %s, token %d, expires in %v", key, info.Owner, info.Token, info.TTL.Round(time.Millisecond))
	if info.Waiters >= 0 {
		fmt.Fprintf(w, ", %d waiting", info.Waiters)
	}
	fmt.Fprintln(w)
	return nil
}
