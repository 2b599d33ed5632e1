// Command distlock-bench compares lock backends side by side: distlock on
// each store, the store's other lock libraries (its peers) and its bare
// round trip, with the same workloads, and writes a report (a table on
// stdout; report.html, report.json, results.csv and SVG charts in --out).
//
//	distlock-bench [--url NAME=URL ...] [--config FILE] [--embedded] [--out DIR]
//
// It is a command of its own, apart from the distlock CLI, so that the
// CLI stays small: the comparison engine, the peer libraries, the charts
// and the embedded etcd server ride only here. Install it with
//
//	go install github.com/distlock/distlock/bench/cmd/distlock-bench@latest
//
// See docs/cli.md for every flag and how each figure is computed.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/bench/internal/compare"
	_ "github.com/distlock/distlock/etcdlock"
	_ "github.com/distlock/distlock/memlock"
	_ "github.com/distlock/distlock/redislock"
	_ "github.com/distlock/distlock/redlock"
	_ "github.com/distlock/distlock/sqllock"
	_ "github.com/distlock/distlock/zklock"
)

// Exit codes, as the distlock CLI's.
const (
	ExitOK          = 0
	ExitFailure     = 1  // any other error, a violation seen among them
	ExitUsage       = 64 // bad flags, URL or config file (EX_USAGE)
	ExitUnavailable = 69 // no backend to compare (EX_UNAVAILABLE)
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitWith(code int, err error) error { return &exitError{code: code, err: err} }

func classify(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, distlock.ErrInvalidConfig), errors.Is(err, distlock.ErrInvalidKey):
		return ExitUsage
	case errors.Is(err, distlock.ErrUnavailable):
		return ExitUnavailable
	}
	return ExitFailure
}

func newRoot() *cobra.Command {
	root := newBenchCmd()
	root.Version = versionLine()
	root.SetVersionTemplate("{{.Version}}\n")
	root.SilenceUsage, root.SilenceErrors = true, true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitWith(ExitUsage, err) })
	root.Args = func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return exitWith(ExitUsage, fmt.Errorf("unknown command %q: distlock-bench takes flags only (the lock commands are distlock's)", args[0]))
		}
		return nil
	}
	addLogFlag(root)
	return root
}

func main() {
	compare.HolderMain() // a crash-recovery holder this command started: never returns
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRoot().ExecuteContext(ctx)
	code := classify(err)
	if err != nil {
		fmt.Fprintln(os.Stderr, "distlock-bench: "+strings.TrimPrefix(err.Error(), "distlock: "))
	}
	stop()
	os.Exit(code)
}
