package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/bench/internal/compare"
	"github.com/distlock/distlock/bench/internal/compare/render"
	"github.com/distlock/distlock/bench/internal/peers"
	"github.com/distlock/distlock/memlock"
	"github.com/distlock/distlock/sandbox"
)

// targetSet is the backends of one bench run and what must be stopped
// after it.
type targetSet struct {
	targets  []compare.Target
	stores   []render.StoreInfo
	provider string
	closers  []func() error
}

func (s *targetSet) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](); err != nil {
			fmt.Fprintln(os.Stderr, "distlock-bench: cleanup:", err)
		}
	}
}

// benchConfig is the --config file: the backends, and workload sizes
// under the names of the flags that set them (configKeys).
type benchConfig struct {
	Backends []struct {
		Name string `yaml:"name"`
		URL  string `yaml:"url"`
	} `yaml:"backends"`
	Sizes map[string]any `yaml:",inline"`
}

// configKeys are the flags a --config file may set, with "_" for "-".
var configKeys = []string{"workers", "iterations", "duration", "ttl", "rounds", "peers", "workloads",
	"permits", "semaphore-workers", "semaphore-hold", "rw-workers", "rw-reads", "rw-hold"}

func collectTargets(ctx context.Context, o *benchOpts) (*targetSet, error) {
	s := &targetSet{}
	urls := append(slices.Clone(o.urls), o.fileURLs...)
	for _, u := range urls {
		t, err := parseTarget(u)
		if err != nil {
			return nil, err
		}
		s.targets = append(s.targets, t)
	}
	if len(s.targets) > 0 {
		s.provider = "given URLs"
		return s, nil
	}
	s.targets = append(s.targets, memTarget("mem", "distlock-bench", "mem://distlock-bench"))
	if o.embedded {
		s.provider = "embedded"
		err := addEmbedded(ctx, s)
		return s, err
	}
	startSandbox(ctx, s)
	return s, nil
}

// readBenchConfig reads the --config file at path: it returns its
// backends as NAME=URL, and sets each flag the file gives a value for,
// unless the command line gave it: a flag given explicitly wins over the
// file, the file over the flag's default.
func readBenchConfig(path string, flags *pflag.FlagSet) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, exitWith(ExitUsage, fmt.Errorf("--config: %w", err))
	}
	var c benchConfig
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, exitWith(ExitUsage, fmt.Errorf("--config %s: %w", path, err))
	}
	var urls []string
	for i, b := range c.Backends {
		if b.URL == "" {
			return nil, exitWith(ExitUsage, fmt.Errorf("--config %s: backend %d has no url", path, i+1))
		}
		if b.Name != "" {
			urls = append(urls, b.Name+"="+b.URL)
		} else {
			urls = append(urls, b.URL)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(c.Sizes)) {
		name := strings.ReplaceAll(key, "_", "-")
		if !slices.Contains(configKeys, name) {
			return nil, exitWith(ExitUsage, fmt.Errorf("--config %s: field %s not found: want backends or one of %s",
				path, key, strings.ReplaceAll(strings.Join(configKeys, ", "), "-", "_")))
		}
		if flags.Changed(name) {
			continue
		}
		v := fmt.Sprint(c.Sizes[key])
		if list, ok := c.Sizes[key].([]any); ok {
			var items []string
			for _, x := range list {
				items = append(items, fmt.Sprint(x))
			}
			v = strings.Join(items, ",")
		}
		if err := flags.Set(name, v); err != nil {
			return nil, exitWith(ExitUsage, fmt.Errorf("--config %s: %s: %w", path, key, err))
		}
	}
	return urls, nil
}

// parseTarget reads NAME=URL or URL.
func parseTarget(s string) (compare.Target, error) {
	name, raw := "", s
	if i := strings.Index(s, "="); i > 0 && !strings.Contains(s[:i], "://") {
		name, raw = s[:i], s[i+1:]
	}
	u, err := backend.ParseURL(raw)
	if err != nil {
		return compare.Target{}, exitWith(ExitUsage, fmt.Errorf("--url: %w", err))
	}
	if name == "" {
		name = u.Scheme
	}
	if u.Scheme == "mem" && len(u.Hosts) <= 1 { // in process: a holder process would have a store of its own
		return memTarget(name, strings.Join(u.Hosts, ""), raw), nil
	}
	return compare.Target{Name: name, URL: raw}, nil
}

// memTarget is the in-process backend; its crash is a driver Kill.
func memTarget(name, store, url string) compare.Target {
	return compare.Target{
		Name: name,
		URL:  url,
		Crash: func(ctx context.Context, key string, ttl time.Duration) (time.Time, error) {
			d, err := memlock.Named(store).NewDriver(nil)
			if err != nil {
				return time.Time{}, err
			}
			l := distlock.New(d, distlock.WithDefaultTTL(ttl))
			if _, err := l.Acquire(ctx, key); err != nil {
				l.Close()
				return time.Time{}, err
			}
			d.Kill() // as if the holder's process died: the store keeps its lock until the TTL
			killed := time.Now()
			_ = l.Close()
			return killed, nil
		},
	}
}

// startSandbox starts one throwaway server per registered backend kind.
func startSandbox(ctx context.Context, s *targetSet) {
	kinds := []struct {
		kind   sandbox.Kind
		nodes  int
		scheme string
		name   string
		query  string
	}{
		{kind: sandbox.Redis, scheme: "redis", name: "redis"},
		{kind: sandbox.Redis, nodes: 3, scheme: "redis", name: "redlock", query: "?mode=redlock"},
		{kind: sandbox.MariaDB, scheme: "mysql", name: "mysql"},
		{kind: sandbox.Postgres, scheme: "postgres", name: "postgres"},
		{kind: sandbox.ZooKeeper, scheme: "zk", name: "zookeeper"}, {kind: sandbox.Etcd, scheme: "etcd", name: "etcd"},
	}
	for _, k := range kinds {
		if _, err := backend.Lookup(k.scheme); err != nil {
			continue
		}
		what := fmt.Sprintf("a throwaway %s server", k.kind)
		if k.nodes > 1 {
			what = fmt.Sprintf("%d throwaway %s servers (%s)", k.nodes, k.kind, k.name)
		}
		fmt.Fprintf(os.Stderr, "distlock-bench: starting %s...\n", what)
		g, err := sandbox.Start(ctx, sandbox.Spec{Kind: k.kind, Nodes: k.nodes, Stock: true})
		if err != nil {
			fmt.Fprintf(os.Stderr, "distlock-bench: skipping %s: %v\n", k.name, err)
			continue
		}
		s.provider = g.Provider()
		s.closers = append(s.closers, g.Close)
		s.targets = append(s.targets, compare.Target{Name: k.name, URL: g.URL() + k.query})
	}
}

func machineInfo(provider string) map[string]string {
	m := map[string]string{
		"os":      runtime.GOOS + "/" + runtime.GOARCH,
		"cpus":    fmt.Sprint(runtime.NumCPU()),
		"go":      runtime.Version(),
		"servers": provider,
	}
	if h, err := os.Hostname(); err == nil {
		m["host"] = h
	}
	if v := peers.ModuleVersion(libraryPath); v != "" {
		m["distlock"] = v
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				m["commit"] = s.Value
			}
		}
	}
	if v := fileField("/proc/cpuinfo", "model name", ":"); v != "" {
		m["cpu"] = v
	}
	if v := fileField("/proc/meminfo", "MemTotal", ":"); v != "" {
		var kb int64
		if _, err := fmt.Sscanf(v, "%d kB", &kb); err == nil {
			m["memory"] = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
		}
	}
	if v := fileField("/etc/os-release", "PRETTY_NAME", "="); v != "" {
		m["os"] += ", " + strings.Trim(v, `"`)
	}
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m["kernel"] = strings.TrimSpace(string(raw))
	}
	return m
}

// fileField returns the value of the first line of a "key SEP value"
// file whose key is key, trimmed ("" when there is none).
func fileField(path, key, sep string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		k, v, ok := strings.Cut(line, sep)
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
