// Command distlock holds a distributed lock around a command or for a
// script, and inspects locks. The comparison of lock backends side by side
// is a command of its own, distlock-bench (module bench).
//
//	distlock run     --url URL --key KEY [--ttl 30s] [--wait 5m | --no-wait] -- CMD ARGS...
//	distlock elect   --url URL --name NAME [--value V] [--ttl 30s] [--wait 5m] -- CMD ARGS...
//	distlock hold    --url URL --key KEY [--ttl 30s] [--wait 5m | --no-wait] [--json]
//	distlock status  --url URL --key KEY [--json] [--timeout 10s]
//	distlock list    --url URL [--prefix P] [--limit 100] [--json] [--timeout 10s]
//	distlock release --url URL --key KEY --force [--by WHO] [--reason TEXT] [--json]
//	distlock version (or --version)
//
// --url defaults to $DISTLOCK_URL. See docs/cli.md for exit codes and
// every flag.
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
	_ "github.com/distlock/distlock/etcdlock"
	_ "github.com/distlock/distlock/memlock"
	_ "github.com/distlock/distlock/redislock"
	_ "github.com/distlock/distlock/redlock"
	_ "github.com/distlock/distlock/sqllock"
	_ "github.com/distlock/distlock/zklock"
)

// Exit codes of distlock itself. When CMD ran, `distlock run` exits with
// CMD's own status instead (128+N if a signal N killed it).
const (
	ExitOK          = 0
	ExitFailure     = 1  // any other error
	ExitFree        = 3  // status: the lock is free (0: held)
	ExitUsage       = 64 // bad flags, URL or parameters (EX_USAGE)
	ExitUnavailable = 69 // the backend could not be reached (EX_UNAVAILABLE)
	ExitLost        = 70 // the lock was lost while CMD ran; CMD was terminated
	ExitNotAcquired = 75 // the lock is held elsewhere (--no-wait) or --wait ran out (EX_TEMPFAIL)
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

func exitWith(code int, err error) error { return &exitError{code: code, err: err} }

// classify maps a library error to an exit code.
func classify(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, distlock.ErrInvalidConfig), errors.Is(err, distlock.ErrInvalidKey),
		errors.Is(err, distlock.ErrUnsupported): // permanent: retrying cannot help
		return ExitUsage
	case errors.Is(err, distlock.ErrUnavailable):
		return ExitUnavailable
	case errors.Is(err, distlock.ErrNotAcquired):
		return ExitNotAcquired
	case errors.Is(err, distlock.ErrLost):
		return ExitLost
	}
	return ExitFailure
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "distlock",
		Short:         "Distributed locks over Redis, MySQL/MariaDB, ZooKeeper and etcd",
		Version:       versionLine(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	// Defined here, cobra's would take -v as well.
	root.Flags().Bool("version", false, "print the command's version and VCS commit, and exit")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitWith(ExitUsage, err) })
	root.AddCommand(newRunCmd(), newElectCmd(), newHoldCmd(), newStatusCmd(), newListCmd(), newReleaseCmd(), newVersionCmd())
	addLogFlag(root)
	usageExits(root)
	return root
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == guardArg {
		os.Exit(runGuard(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRoot().ExecuteContext(ctx)
	code := classify(err)
	var ee *exitError
	if err != nil && !(errors.As(err, &ee) && ee.err == nil) {
		fmt.Fprintln(os.Stderr, "distlock: "+strings.TrimPrefix(err.Error(), "distlock: "))
	}
	stop()
	os.Exit(code)
}

// rewordedError is err with its text between a prefix and a suffix, the
// library's own "distlock: " prefix dropped (main prints one), so that a
// line reads "distlock: hold: lease on "job" lost: ...", not "distlock:
// hold: distlock: lease on ...". It unwraps to err.
type rewordedError struct {
	prefix, suffix string
	err            error
}

func (e *rewordedError) Error() string {
	return e.prefix + strings.TrimPrefix(e.err.Error(), "distlock: ") + e.suffix
}

func (e *rewordedError) Unwrap() error { return e.err }

func reword(prefix string, err error, suffix string) error {
	return &rewordedError{prefix: prefix, suffix: suffix, err: err}
}
