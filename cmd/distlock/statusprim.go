package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

// semaphoreStatusJSON and rwStatusJSON are the --json outputs of status
// --semaphore and --rw.
type semaphoreStatusJSON struct {
	Backend string       `json:"backend"`
	Key     string       `json:"key"`
	Held    int          `json:"held"`
	Holders []holderJSON `json:"holders"`
	Waiters int          `json:"waiters"` // -1: the store does not know
}

type rwStatusJSON struct {
	Backend string       `json:"backend"`
	Key     string       `json:"key"`
	Writer  *holderJSON  `json:"writer,omitempty"`
	Readers []holderJSON `json:"readers"`
	Waiters int          `json:"waiters"`
}

type holderJSON struct {
	Owner   string  `json:"owner"`
	Permits int     `json:"permits,omitempty"`
	Token   uint64  `json:"token"`
	TTL     float64 `json:"ttl_seconds"`
}

func holdersJSON(hs []backend.Holder) []holderJSON {
	out := make([]holderJSON, 0, len(hs))
	for _, h := range hs {
		out = append(out, holderJSON{Owner: h.Owner, Permits: h.Permits, Token: h.Token, TTL: h.TTL.Seconds()})
	}
	return out
}

// semaphoreStatus prints key's semaphore grants; exit 0 when a permit is
// held, ExitFree when none.
func semaphoreStatus(ctx context.Context, w io.Writer, o queryOpts, key string) error {
	qctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	locker, in, err := openAs[backend.Inspector](qctx, o, "status --semaphore")
	if err != nil {
		return o.unanswered(ctx, qctx, "status", err)
	}
	defer locker.Close()
	info, err := inspectKind(qctx, locker, in, "status --semaphore", key, backend.Permits)
	if err != nil {
		return o.unanswered(ctx, qctx, "status", err)
	}
	if o.asJSON {
		err = printJSONLine(w, semaphoreStatusJSON{Backend: locker.Capabilities().Name, Key: key,
			Held: info.Permits, Holders: holdersJSON(info.Holders), Waiters: info.Waiters})
	} else {
		fmt.Fprintf(w, "%s: %d permits held by %d grants%s\n", key, info.Permits, len(info.Holders), waitingNote(info.Waiters))
		err = printHolders(w, info.Holders, true)
	}
	if err != nil || info.Permits > 0 {
		return err
	}
	return exitWith(ExitFree, nil)
}

// rwStatus prints key's read-write lock holders; exit 0 when held,
// ExitFree when free.
func rwStatus(ctx context.Context, w io.Writer, o queryOpts, key string) error {
	qctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	locker, in, err := openAs[backend.Inspector](qctx, o, "status --rw")
	if err != nil {
		return o.unanswered(ctx, qctx, "status", err)
	}
	defer locker.Close()
	info, err := inspectKind(qctx, locker, in, "status --rw", key, backend.Write)
	if err != nil {
		return o.unanswered(ctx, qctx, "status", err)
	}
	if o.asJSON {
		out := rwStatusJSON{Backend: locker.Capabilities().Name, Key: key, Readers: holdersJSON(info.Holders), Waiters: info.Waiters}
		if info.Owner != "" {
			out.Writer = &holdersJSON([]backend.Holder{{Owner: info.Owner, Token: info.Token, TTL: info.TTL}})[0]
		}
		err = printJSONLine(w, out)
	} else {
		switch {
		case info.Owner != "":
			fmt.Fprintf(w, "%s: written by %s, token %d, expires in %v%s\n", key, info.Owner, info.Token,
				info.TTL.Round(time.Millisecond), waitingNote(info.Waiters))
		case len(info.Holders) > 0:
			fmt.Fprintf(w, "%s: read by %d owners%s\n", key, len(info.Holders), waitingNote(info.Waiters))
			err = printHolders(w, info.Holders, false)
		default:
			fmt.Fprintf(w, "%s: free\n", key)
		}
	}
	if err != nil || info.Held {
		return err
	}
	return exitWith(ExitFree, nil)
}

// inspectKind is in.Inspect of key's lock of kind; a backend that cannot
// inspect that kind is reported as for one without an Inspector (see
// openAs).
func inspectKind(ctx context.Context, locker *distlock.Locker, in backend.Inspector, name, key string, kind backend.Kind) (backend.Info, error) {
	info, err := in.Inspect(ctx, key, kind)
	if errors.Is(err, backend.ErrUnsupported) {
		return info, fmt.Errorf("%s: %w by the %s backend", name, distlock.ErrUnsupported, locker.Capabilities().Name)
	}
	return info, err
}

func waitingNote(waiters int) string {
	if waiters < 0 {
		return ""
	}
	return fmt.Sprintf(", %d waiting", waiters)
}

// printHolders writes a table of hs, with their permits if permits is set.
func printHolders(w io.Writer, hs []backend.Holder, permits bool) error {
	if len(hs) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if permits {
		fmt.Fprintln(tw, "  OWNER\tPERMITS\tTOKEN\tEXPIRES IN")
	} else {
		fmt.Fprintln(tw, "  OWNER\tTOKEN\tEXPIRES IN")
	}
	for _, h := range hs {
		if permits {
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%v\n", h.Owner, h.Permits, h.Token, h.TTL.Round(time.Millisecond))
		} else {
			fmt.Fprintf(tw, "  %s\t%d\t%v\n", h.Owner, h.Token, h.TTL.Round(time.Millisecond))
		}
	}
	return tw.Flush()
}
