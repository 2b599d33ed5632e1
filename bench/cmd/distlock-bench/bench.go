package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/bench/internal/compare"
	"github.com/distlock/distlock/bench/internal/compare/render"
)

type benchOpts struct {
	urls       []string
	config     string
	fileURLs   []string // the --config file's backends
	embedded   bool
	out        string
	workloads  []string
	noProgress bool
	peers      bool
	cfg        compare.Config
}

func newBenchCmd() *cobra.Command {
	var o benchOpts
	cmd := &cobra.Command{
		Use:   "distlock-bench [--url NAME=URL ...] [--config FILE] [--embedded] [--out DIR]",
		Short: "Compare backends side by side: latency, throughput, hand-off, semaphores, crash recovery, safety",
		Long: `Run the same workloads on every backend, one after the other (uncontended:
a store's libraries taking turns of 10 pairs), and report them side by side:
a table on stdout, and report.json, results.csv, one SVG chart per workload
and a self-contained report.html in --out.

Each workload runs --rounds times on every backend, in a rotated order, and
the report gives the median round with the smallest and largest. Beside
each store, the same workloads run the store's other lock libraries
(--peers: redsync and bsm/redislock on Redis, GET_LOCK and SELECT ... FOR
UPDATE on MySQL, concurrency.Mutex on etcd, zk.Lock on ZooKeeper) and one
bare round trip of the store (its floor).

The semaphore workload (--semaphore-workers clients on one semaphore of
--permits permits) and the rw workload (--rw-workers clients on one
read-write lock, --rw-reads percent of their acquisitions reads) run
distlock alone, and list a backend without a native semaphore or
read-write lock as unsupported.

Backends come from --url flags (NAME=URL, or just URL), or a YAML config
file (--config). With neither, throwaway servers are started for every
backend (containers or local processes, see DISTLOCK_SANDBOX), plus the
in-process mem backend. --embedded uses only in-process backends, so it
runs on any machine with nothing installed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.config != "" {
				urls, err := readBenchConfig(o.config, cmd.Flags())
				if err != nil {
					return err
				}
				o.fileURLs = urls
			}
			return bench(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.urls, "url", nil, "backend to compare, NAME=URL or URL (repeatable)")
	f.StringVar(&o.config, "config", "", "YAML file listing backends and workload sizes")
	f.BoolVar(&o.embedded, "embedded", false, "use only in-process backends (nothing to install)")
	f.StringVar(&o.out, "out", "distlock-report", "folder for the report files")
	f.StringSliceVar(&o.workloads, "workloads", nil, "workloads to run (default all: "+strings.Join(compare.Workloads, ",")+")")
	f.IntVar(&o.cfg.Workers, "workers", 8, "clients in the contended and many-keys workloads")
	f.IntVar(&o.cfg.Iterations, "iterations", 200, "acquire+release pairs in the uncontended workload")
	f.DurationVar(&o.cfg.Duration, "duration", 5*time.Second, "length of the contended and many-keys runs")
	f.DurationVar(&o.cfg.TTL, "ttl", 3*time.Second, "lease TTL (bounds crash recovery)")
	f.IntVar(&o.cfg.Permits, "permits", 4, "permits of the semaphore in the semaphore workload")
	f.IntVar(&o.cfg.SemaphoreWorkers, "semaphore-workers", 16, "clients sharing the semaphore in the semaphore workload")
	f.DurationVar(&o.cfg.SemaphoreHold, "semaphore-hold", 0, "how long each client holds its permit in the semaphore workload")
	f.IntVar(&o.cfg.RWWorkers, "rw-workers", 16, "clients sharing the read-write lock in the rw workload")
	f.IntVar(&o.cfg.RWReads, "rw-reads", 90, "percentage of the rw workload's acquisitions that take the read side (1 to 100)")
	f.DurationVar(&o.cfg.RWHold, "rw-hold", 0, "how long each client holds a side in the rw workload")
	f.IntVar(&o.cfg.Rounds, "rounds", 3, "times each workload runs on each backend (the report gives the median, min and max)")
	f.BoolVar(&o.peers, "peers", true, "also measure each store's other lock libraries (--peers=false: distlock and the floors only)")
	f.BoolVar(&o.noProgress, "no-progress", false, "no progress bar: one line per finished step instead")
	return cmd
}

func bench(ctx context.Context, stdout io.Writer, o benchOpts) error {
	o.cfg.Workloads = o.workloads
	if err := o.cfg.Validate(); err != nil {
		return exitWith(ExitUsage, err)
	}
	if len(o.urls)+len(o.fileURLs) > 0 && o.embedded {
		return exitWith(ExitUsage, errors.New("--url and --embedded exclude each other"))
	}
	ts, err := collectTargets(ctx, &o)
	if err != nil {
		return err
	}
	defer ts.close()
	if len(ts.targets) == 0 {
		return exitWith(ExitUnavailable, errors.New("no backend to compare"))
	}
	addPeers(ctx, ts, o.peers)
	if exe, err := os.Executable(); err == nil {
		o.cfg.Exe = exe
	}
	fmt.Fprintf(os.Stderr, "distlock-bench: %d backends (%s)\n", len(ts.targets), names(ts.targets))
	step := progress(o.noProgress, o.cfg.Steps(ts.targets))
	results := compare.Run(ctx, ts.targets, o.cfg, step)
	rep := render.NewReport(ts.targets, o.cfg, results,
		render.Meta{Machine: machineInfo(ts.provider), Command: commandLine(os.Args), Stores: ts.stores})
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	if err := rep.WriteFiles(o.out); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	abs, _ := filepath.Abs(o.out)
	fmt.Fprintf(stdout, "\nreport: %s\n", filepath.Join(abs, "report.html"))
	var broken error
	for _, r := range results {
		if v, ok := r.Metric("violations"); ok && v > 0 {
			if r.Library != "distlock" {
				fmt.Fprintf(os.Stderr, "distlock-bench: the peer %s let two holders in at once %v times\n", r.Backend, v)
				continue
			}
			if r.Workload == "rw" {
				broken = cmp.Or(broken, fmt.Errorf("%s let a writer hold the read-write lock with another holder %v times", r.Backend, v))
				continue
			}
			if r.Workload == "semaphore" {
				broken = cmp.Or(broken, fmt.Errorf("%s let more than %d permits be held at once %v times", r.Backend, o.cfg.Permits, v))
				continue
			}
			broken = cmp.Or(broken, fmt.Errorf("%s let two holders in at once %v times", r.Backend, v))
		}
	}
	return broken
}

func names(ts []compare.Target) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.Name)
	}
	return strings.Join(s, ", ")
}

// progress returns a step callback drawing a bar on a terminal, or printing
// one line per step otherwise (or with --no-progress).
func progress(off bool, steps int) func(compare.Result, int) {
	if off || !term.IsTerminal(int(os.Stderr.Fd())) {
		return func(r compare.Result, round int) {
			status := "ok"
			switch {
			case r.Error != "":
				status = "error: " + r.Error
			case r.Unsupported != "":
				status = "unsupported: " + r.Unsupported
			}
			fmt.Fprintf(os.Stderr, "  %s/%s round %d: %s\n", r.Backend, r.Workload, round+1, status)
		}
	}
	bar := progressbar.NewOptions(steps, progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription("benchmarking"), progressbar.OptionShowCount(),
		progressbar.OptionClearOnFinish())
	return func(r compare.Result, round int) {
		bar.Describe(fmt.Sprintf("%s/%s round %d", r.Backend, r.Workload, round+1))
		_ = bar.Add(1)
	}
}

// commandLine returns the command as typed, named "distlock-bench", with every
// password in a URL argument (URL, NAME=URL, --url=URL) redacted.
func commandLine(args []string) string {
	out := []string{"distlock-bench"}
	for _, a := range args[1:] {
		if i := strings.Index(a, "://"); i > 0 {
			start := strings.LastIndexAny(a[:i], "=") + 1
			a = a[:start] + backend.RedactURL(a[start:])
		}
		out = append(out, shellQuote(a))
	}
	return strings.Join(out, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,@+%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
