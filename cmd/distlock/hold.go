package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/distlock/distlock"
)

func newHoldCmd() *cobra.Command {
	var o lockOpts
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "hold --url URL --key KEY [--ttl 30s] [--wait 5m | --no-wait] [--json]",
		Short: "Hold a lock until stdin closes or a signal, for scripts (like etcdctl lock)",
		Long: `Acquire the lock KEY, print it, and hold it (renewed) until stdin
closes or distlock gets SIGINT, SIGTERM or SIGHUP; then release it and
exit 0.

The line printed once the lock is held is KEY, the fencing token and the
owner id, separated by tabs (keys hold no tabs), or with --json one JSON
object: {"backend":...,"key":...,"token":...,"owner":...}. Anything read
from stdin is discarded. If stdin closes while distlock still waits for
the lock, it gives up (exit 75).

Exit status: 0 released after stdin closed or a signal; 64 bad usage,
69 backend unreachable, 70 lease lost while held, 75 not acquired.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check("hold"); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGHUP) // SIGINT and SIGTERM: main
			defer stop()
			// A reader gone (stdout a closed pipe) makes the write fail
			// instead of killing distlock with the lock still held.
			signal.Ignore(syscall.SIGPIPE)
			return hold(ctx, o, asJSON, closedAtEOF(os.Stdin), cmd.OutOrStdout())
		},
	}
	addLockFlags(cmd, &o)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the held lock as one JSON line")
	return cmd
}

// closedAtEOF returns a channel closed when r ends (or fails). The
// goroutine reading r ends then: reading os.Stdin it may outlive hold,
// but not the process, which exits right after.
func closedAtEOF(r io.Reader) <-chan struct{} {
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, r)
		close(eof)
	}()
	return eof
}

var errStdinClosed = errors.New("stdin closed")

// hold takes o.key, writes it to w, and holds it until ctx ends (a signal)
// or eof closes, then releases it. A wait for the lock ends when eof
// closes too (exit 75); a lease lost while held is exit 70.
func hold(ctx context.Context, o lockOpts, asJSON bool, eof <-chan struct{}, w io.Writer) error {
	locker, err := o.open(ctx)
	if err != nil {
		return err
	}
	defer locker.Close()

	lease, err := acquireUntilEOF(ctx, locker, o, eof)
	if err != nil {
		return err
	}
	if err := printHeld(w, locker, lease, asJSON); err != nil {
		_ = releaseLease(lease)
		return fmt.Errorf("hold: printing the lease: %w", err)
	}
	select {
	case <-ctx.Done():
	case <-eof:
	case <-lease.Done():
	}
	lost := lease.Err() // nil while held
	rerr := releaseLease(lease)
	if lost != nil {
		return exitWith(ExitLost, reword("hold: ", lost, ""))
	}
	if rerr != nil {
		return fmt.Errorf("hold: release: %w", rerr)
	}
	return nil
}

// acquireUntilEOF is o.acquire, given up when eof closes.
func acquireUntilEOF(ctx context.Context, locker *distlock.Locker, o lockOpts, eof <-chan struct{}) (*distlock.Lease, error) {
	actx, cancel := context.WithCancelCause(ctx)
	stopped := make(chan struct{})
	defer func() { cancel(nil); <-stopped }()
	go func() {
		defer close(stopped)
		select {
		case <-eof:
			cancel(errStdinClosed)
		case <-actx.Done():
		}
	}()
	lease, err := o.acquire(actx, locker, "hold")
	if err != nil && errors.Is(context.Cause(actx), errStdinClosed) {
		return nil, exitWith(ExitNotAcquired, fmt.Errorf("hold: stdin closed before lock %q was acquired", o.key))
	}
	return lease, err
}

// heldJSON is hold's --json line.
type heldJSON struct {
	Backend string `json:"backend"`
	Key     string `json:"key"`
	Token   uint64 `json:"token"`
	Owner   string `json:"owner"`
}

func printHeld(w io.Writer, locker *distlock.Locker, lease *distlock.Lease, asJSON bool) error {
	if !asJSON {
		_, err := fmt.Fprintf(w, "%s\t%d\t%s\n", lease.Key(), lease.Token(), lease.Owner())
		return err
	}
	return printJSONLine(w, heldJSON{Backend: locker.Capabilities().Name, Key: lease.Key(), Token: lease.Token(), Owner: lease.Owner()})
}

// releaseLease releases lease with its own bound: the command's ctx may
// have ended already (a signal).
func releaseLease(lease *distlock.Lease) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return lease.Release(ctx)
}
