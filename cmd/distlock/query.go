package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/distlock/distlock"
)

// queryOpts are the flags of the subcommands that read a store's state
// without taking a lock (status, list).
type queryOpts struct {
	url     string
	timeout time.Duration
	asJSON  bool
}

// addQueryFlags adds --url, --timeout (and its old name --connect-timeout,
// deprecated) and --json to cmd.
func addQueryFlags(cmd *cobra.Command, o *queryOpts) {
	urlFlag(cmd, &o.url)
	const def = 10 * time.Second
	cmd.Flags().DurationVar(&o.timeout, "timeout", def, "bound on the whole query, reaching the backend included (exit 69 beyond it)")
	cmd.Flags().DurationVar(&o.timeout, "connect-timeout", def, "old name of --timeout")
	_ = cmd.Flags().MarkDeprecated("connect-timeout", "use --timeout")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON for scripts")
}

// check reports a usage error (exit 64) in o; name is the subcommand's.
func (o queryOpts) check(name string) error {
	if err := needURL(o.url); err != nil {
		return err
	}
	if o.timeout <= 0 {
		return exitWith(ExitUsage, fmt.Errorf("%s: --timeout must be positive", name))
	}
	return nil
}

// openAs opens o.url within qctx and returns its Locker and driver as T, a
// backend's optional interface; a driver without it is ErrUnsupported
// (exit 64: asking again cannot help). The caller closes the Locker.
func openAs[T any](qctx context.Context, o queryOpts, name string) (*distlock.Locker, T, error) {
	var none T
	locker, err := distlock.Open(qctx, o.url, distlock.WithLogger(logger))
	if err != nil {
		return nil, none, err
	}
	d, ok := locker.Driver().(T)
	if !ok {
		err := fmt.Errorf("%s: %w by the %s backend", name, distlock.ErrUnsupported, locker.Capabilities().Name)
		_ = locker.Close()
		return nil, none, err
	}
	return locker, d, nil
}

// unanswered turns err, from a query bounded by qctx (from ctx and
// --timeout), into exit 69 when the backend did not answer in time.
func (o queryOpts) unanswered(ctx, qctx context.Context, name string, err error) error {
	if err != nil && qctx.Err() != nil && ctx.Err() == nil && !errors.Is(err, distlock.ErrUnavailable) {
		return exitWith(ExitUnavailable, fmt.Errorf("%s: the backend did not answer within --timeout %v: %w", name, o.timeout, err))
	}
	return err
}
