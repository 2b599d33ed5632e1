package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

func newListCmd() *cobra.Command {
	var o queryOpts
	var prefix string
	var limit int
	cmd := &cobra.Command{
		Use:   "list --url URL [--prefix P] [--limit 1000] [--json] [--timeout 10s]",
		Short: "List the held locks whose key begins with a prefix, where the store can enumerate them",
		Long: `List the locks held now whose key begins with --prefix (every held lock
by default), sorted by key: owner, fencing token, remaining TTL, waiters.
With --json, one JSON object per lock and line, as status --json prints.

Stores that can enumerate their locks support it: Redis (not Redlock),
ZooKeeper, etcd and mem://; MySQL exits 64 with "unsupported by the mysql
backend".

Exit status: 0 listed (even none), 64 bad usage or a backend that
cannot list, 69 backend unreachable (or no answer within --timeout),
1 any other error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check("list"); err != nil {
				return err
			}
			if limit < 0 {
				return exitWith(ExitUsage, fmt.Errorf("list: --limit must not be negative"))
			}
			return list(cmd.Context(), cmd.OutOrStdout(), o, prefix, limit)
		},
	}
	addQueryFlags(cmd, &o)
	cmd.Flags().StringVar(&prefix, "prefix", "", "list only keys that begin with this")
	cmd.Flags().IntVar(&limit, "limit", 1000, "list at most this many locks (0: no bound); a note on stderr says when there were more")
	return cmd
}

func list(ctx context.Context, w io.Writer, o queryOpts, prefix string, limit int) error {
	qctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	locker, ls, err := openInspector(qctx, o, "list")
	if err != nil {
		return o.unanswered(ctx, qctx, "list", err)
	}
	defer locker.Close()
	ask := limit
	if limit > 0 {
		ask++ // one more, to know whether there are more
	}
	var sts []state
	infos, err := ls.List(qctx, prefix, ask)
	if errors.Is(err, backend.ErrUnsupported) {
		err = fmt.Errorf("list: %w by the %s backend", distlock.ErrUnsupported, locker.Capabilities().Name)
	}
	if err != nil {
		return o.unanswered(ctx, qctx, "list", err)
	}
	if limit > 0 && len(infos) > limit {
		infos = infos[:limit]
		defer fmt.Fprintf(os.Stderr, "distlock: list: more than %d locks; only the first %d shown (see --limit)\n", limit, limit)
	}
	now := time.Now()
	for _, info := range infos {
		st := lockState(locker.Capabilities().Name, info, now)
		if o.asJSON {
			if err := printJSONLine(w, st.json()); err != nil {
				return err
			}
			continue
		}
		sts = append(sts, st)
	}
	if o.asJSON {
		return nil
	}
	return printList(w, sts)
}
