package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// binary is the distlock-bench command built once for the tests that
// drive it.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "distlock-bench")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "distlock-bench")
	if out, err := exec.Command("go", "build", "-race", "-o", binary, ".").CombinedOutput(); err != nil {
		panic("building distlock-bench: " + err.Error() + "\n" + string(out))
	}
	code := 0
	func() {
		defer os.RemoveAll(dir)
		code = m.Run()
		if code == 0 {
			if err := goleak.Find(); err != nil {
				os.Stderr.WriteString("goleak: " + err.Error() + "\n")
				code = 1
			}
		}
	}()
	os.Exit(code)
}

// runCLI runs the binary and returns its combined output and exit code.
func runCLI(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	// Bounded: a hanging command fails its test instead of the package.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running distlock-bench: %v", err)
	}
	return string(out), 0
}

func TestUsageErrors(t *testing.T) {
	const dsn = "host=127.0.0.1 port=25439 user=pgadmin password=PgSecretPw dbname=appdb"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--workloads", "fastest"}, `unknown workload "fastest"`},
		{[]string{"--url", "mem://", "--embedded"}, "exclude each other"},
		{[]string{"--bogus"}, "unknown flag"},
		{[]string{"extra"}, "unknown command"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--url", dsn, "--duration", "1s"}, "URL"},
	} {
		out, code := runCLI(t, nil, tc.args...)
		if code != ExitUsage || !strings.Contains(out, tc.want) || strings.Contains(out, "PgSecretPw") {
			t.Errorf("distlock-bench %q: exit %d, output %q; want %d, %q and no password", tc.args, code, out, ExitUsage, tc.want)
		}
	}
}

func TestBenchWritesReport(t *testing.T) {
	dir := t.TempDir()
	out, code := runCLI(t, nil, "--embedded", "--duration", "300ms", "--iterations", "20",
		"--workers", "3", "--ttl", "2s", "--rounds", "2", "--permits", "2", "--semaphore-workers", "4", "--rw-workers", "4", "--rw-hold", "1ms", "--out", dir, "--no-progress")
	if code != 0 {
		t.Fatalf("bench exit %d:\n%s", code, out)
	}
	for _, want := range []string{"== uncontended", "== contended", "== semaphore", "== rw", "== crash-recovery", "report.html"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench output lacks %q:\n%s", want, out)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Command  string
		Stores   []struct{ Name, Server, Floor string }
		Backends []struct {
			Library, Version string
			Conns            string `json:"conns_per_lease"`
		}
		Results []struct {
			Backend, Workload, Error, Library string
			Floor                             bool
			Runs                              int
			Metrics                           []struct {
				Name            string
				Value, Min, Max float64
				Rounds          []float64
			}
		}
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	// mem, embedded etcd and etcd's concurrency.Mutex run 4 workloads, the
	// etcd floor (a bare Get) all but crash-recovery; mem and embedded
	// etcd run the semaphore and the read-write lock too.
	if len(rep.Results) != 19 {
		t.Errorf("report.json has %d results, want 19 (3 libraries × 4 workloads + the floor's 3 + 2 semaphores + 2 read-write locks)", len(rep.Results))
	}
	libs := map[string]bool{}
	for _, r := range rep.Results {
		libs[r.Library] = true
		if r.Runs != 2 {
			t.Errorf("%s/%s ran %d rounds, want 2", r.Backend, r.Workload, r.Runs)
		}
		for _, m := range r.Metrics {
			if len(m.Rounds) != 2 || m.Min > m.Value || m.Value > m.Max {
				t.Errorf("%s/%s %s: %v in [%v, %v], rounds %v", r.Backend, r.Workload, m.Name, m.Value, m.Min, m.Max, m.Rounds)
			}
		}
	}
	if !libs["distlock"] || !libs["concurrency.Mutex"] || !libs["Get"] {
		t.Errorf("libraries %v, want distlock, concurrency.Mutex and the Get floor", libs)
	}
	if len(rep.Stores) != 2 || rep.Stores[1].Floor != "Get" || !strings.HasPrefix(rep.Stores[1].Server, "etcd ") {
		t.Errorf("stores %+v", rep.Stores)
	}
	// The peer's version comes from the binary's build info, and every
	// library says what connections a lease holds.
	for _, b := range rep.Backends {
		switch b.Library {
		case "concurrency.Mutex":
			if !strings.HasPrefix(b.Version, "etcd/client/v3 v3.") || b.Conns == "" {
				t.Errorf("etcd's Mutex: version %q, connections per lease %q", b.Version, b.Conns)
			}
		case "distlock":
			if b.Version != "(devel)" {
				t.Errorf("distlock built from the checkout: version %q, want (devel)", b.Version)
			}
		}
	}
	if !strings.HasPrefix(rep.Command, "distlock-bench --embedded ") {
		t.Errorf("command %q", rep.Command)
	}
	for _, r := range rep.Results {
		if r.Error != "" {
			t.Errorf("%s/%s failed: %s", r.Backend, r.Workload, r.Error)
		}
		for _, m := range r.Metrics {
			if m.Name == "violations" && m.Value != 0 {
				t.Errorf("%s: %v mutual-exclusion violations", r.Backend, m.Value)
			}
		}
	}
	f, err := os.Open(filepath.Join(dir, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if rows, err := csv.NewReader(f).ReadAll(); err != nil || len(rows) < 5 {
		t.Errorf("results.csv: %d rows, %v", len(rows), err)
	}
	for _, name := range []string{"report.html", "uncontended.svg", "contended.svg", "handoff.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || len(b) < 100 {
			t.Errorf("%s missing or empty: %v", name, err)
		}
		if strings.HasSuffix(name, ".svg") && !strings.Contains(string(b), "<svg") {
			t.Errorf("%s is not an SVG", name)
		}
	}
}

// --peers=false leaves distlock and the floors; a password in a URL never
// reaches the report.
func TestBenchNoPeersRedacted(t *testing.T) {
	dir := t.TempDir()
	const secret = "s3cr"
	out, code := runCLI(t, nil, "--peers=false", "--rounds", "1", "--workloads", "uncontended", "--no-progress",
		"--iterations", "5", "--out", dir, "--url", "r=redis://u:"+secret+"@127.0.0.1:1/0?dial_timeout=200ms")
	if code != 0 || strings.Contains(out, secret) {
		t.Fatalf("bench: exit %d:\n%s", code, out)
	}
	for _, name := range []string{"report.json", "report.html", "results.csv"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), secret) {
			t.Errorf("%s shows the password", name)
		}
		if name == "report.json" && (strings.Contains(string(b), "redsync") || !strings.Contains(string(b), "floor (PING)")) {
			t.Errorf("report.json without peers: want the PING floor and no redsync")
		}
	}
}

func TestBenchConfigFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("backends:\n  - url: mem://\nworkerz: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := runCLI(t, nil, "--config", bad); code != 64 || !strings.Contains(out, "field workerz not found") {
		t.Errorf("config with an unknown field: exit %d, %q", code, out)
	}
	good := filepath.Join(dir, "good.yaml")
	cfg := "backends:\n  - name: memory\n    url: mem://cfg\nworkers: 2\nduration: 200ms\niterations: 10\nttl: 300ms\nworkloads: [uncontended, contended]\n"
	if err := os.WriteFile(good, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := runCLI(t, nil, "--config", good, "--out", filepath.Join(dir, "out"))
	if code != 0 || !strings.Contains(out, "memory") || strings.Contains(out, "== many-keys") {
		t.Errorf("bench --config: exit %d:\n%s", code, out)
	}
}

// A --config file's sizes apply where the command line gave none, and a
// flag given explicitly wins over the file; a value the flag refuses is
// a usage error naming the field.
func TestBenchConfigFlagsWin(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte("backends:\n  - name: memory\n    url: mem://cfgwin\niterations: 7\nrounds: 2\nworkloads: [uncontended]\nrw_reads: 50\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := runCLI(t, nil, "--config", cfg, "--rounds", "1", "--no-progress", "--out", filepath.Join(dir, "out"))
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "out", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfgJSON struct {
		Config map[string]any `json:"config"`
	}
	if err := json.Unmarshal(raw, &cfgJSON); err != nil {
		t.Fatal(err)
	}
	got := cfgJSON.Config
	if got["iterations"] != 7.0 || got["rounds"] != 1.0 || got["rw_reads"] != 50.0 {
		t.Errorf("config %v: want iterations 7 and rw_reads 50 from the file, rounds 1 from the flag", got)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("backends:\n  - url: mem://\nduration: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := runCLI(t, nil, "--config", bad); code != ExitUsage || !strings.Contains(out, "duration") || !strings.Contains(out, "missing unit") {
		t.Errorf("config with a duration without a unit: exit %d, %q", code, out)
	}
}
