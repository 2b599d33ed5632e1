package main

import (
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

	"github.com/distlock/distlock/cmd/distlock/internal/compare"
)

type benchOpts struct {
	urls       []string
	config     string
	embedded   bool
	out        string
	workloads  []string
	noProgress bool
	cfg        compare.Config
}

func newBenchCmd() *cobra.Command {
	var o benchOpts
	cmd := &cobra.Command{
		Use:   "bench [--url NAME=URL ...] [--config FILE] [--embedded] [--out DIR]",
		Short: "Compare backends side by side: latency, throughput, hand-off, crash recovery, safety",
		Long: `Run the same workloads on every backend, one after the other, and report
them side by side: a table on stdout, and report.json, results.csv, one SVG
chart per workload and a self-contained report.html in --out.

Backends come from --url flags (NAME=URL, or just URL), or a YAML config
file (--config). With neither, throwaway servers are started for every
backend (containers or local processes, see DISTLOCK_SANDBOX), plus the
in-process mem backend. --embedded uses only in-process backends, so it
runs on any machine with nothing installed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return bench(cmd.Context(), cmd.OutOrStdout(), o) },
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
	f.BoolVar(&o.noProgress, "no-progress", false, "no progress bar: one line per finished step instead")
	return cmd
}

func bench(ctx context.Context, stdout io.Writer, o benchOpts) error {
	o.cfg.Workloads = o.workloads
	if err := o.cfg.Validate(); err != nil {
		return exitWith(ExitUsage, fmt.Errorf("bench: %w", err))
	}
	if len(o.urls) > 0 && o.embedded {
		return exitWith(ExitUsage, errors.New("bench: --url and --embedded exclude each other"))
	}
	ts, err := collectTargets(ctx, &o)
	if err != nil {
		return err
	}
	defer ts.close()
	if len(ts.targets) == 0 {
		return exitWith(ExitUnavailable, errors.New("bench: no backend to compare"))
	}
	if exe, err := os.Executable(); err == nil {
		o.cfg.Exe = exe
	}
	fmt.Fprintf(os.Stderr, "distlock bench: %d backends (%s)\n", len(ts.targets), names(ts.targets))
	step := progress(o.noProgress, o.cfg.Steps(ts.targets))
	results := compare.Run(ctx, ts.targets, o.cfg, step)
	rep := compare.NewReport(ts.targets, o.cfg, results, machineInfo(ts.provider))
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	if err := rep.WriteFiles(o.out); err != nil {
		return fmt.Errorf("bench: writing the report: %w", err)
	}
	abs, _ := filepath.Abs(o.out)
	fmt.Fprintf(stdout, "\nreport: %s\n", filepath.Join(abs, "report.html"))
	for _, r := range results {
		if v, ok := r.Metric("violations"); ok && v > 0 {
			return fmt.Errorf("bench: %s let %v holders in at once", r.Backend, v)
		}
	}
	return nil
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
func progress(off bool, steps int) func(compare.Result) {
	if off || !term.IsTerminal(int(os.Stderr.Fd())) {
		return func(r compare.Result) {
			status := "ok"
			if r.Error != "" {
				status = "error: " + r.Error
			}
			fmt.Fprintf(os.Stderr, "  %s/%s: %s\n", r.Backend, r.Workload, status)
		}
	}
	bar := progressbar.NewOptions(steps, progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription("benchmarking"), progressbar.OptionShowCount(),
		progressbar.OptionClearOnFinish())
	return func(r compare.Result) {
		bar.Describe(r.Backend + "/" + r.Workload)
		_ = bar.Add(1)
	}
}
