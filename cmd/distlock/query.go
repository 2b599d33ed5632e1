package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
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

// openInspector opens o.url within qctx and returns its Locker and
// driver's Inspector; a driver that cannot read a lock's state
// (Capabilities.Inspect false) is ErrUnsupported (exit 64: asking again
// cannot help). The caller closes the Locker.
func openInspector(qctx context.Context, o queryOpts, name string) (*distlock.Locker, backend.Inspector, error) {
	locker, err := distlock.Open(qctx, o.url, distlock.WithLogger(logger))
	if err != nil {
		return nil, nil, err
	}
	if !locker.Capabilities().Inspect { // declared, and the driver is an Inspector (Offers)
		err := fmt.Errorf("%s: %w by the %s backend", name, distlock.ErrUnsupported, locker.Capabilities().Name)
		_ = locker.Close()
		return nil, nil, err
	}
	return locker, locker.Driver().(backend.Inspector), nil
}

// unanswered turns err, from a query bounded by qctx (from ctx and
// --timeout), into exit 69 when the backend did not answer in time.
func (o queryOpts) unanswered(ctx, qctx context.Context, name string, err error) error {
	if err != nil && qctx.Err() != nil && ctx.Err() == nil && !errors.Is(err, distlock.ErrUnavailable) {
		return exitWith(ExitUnavailable, fmt.Errorf("%s: the backend did not answer within --timeout %v: %w", name, o.timeout, err))
	}
	return err
}
