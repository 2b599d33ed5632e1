package distlock_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// What a user's go.sum gets (docs/architecture.md): `go mod tidy` in a
// module that imports a driver records the modules of the driver's tests
// too, so the test graph of each driver package (go list -deps -test)
// must hold no container stack and no other store's client. The sandbox
// its tests import is stdlib-only; testcontainers-go lives in the module
// sandbox/containers, porcupine in faults.

// containerStack are module path prefixes no driver's test graph may hold.
var containerStack = []string{
	"github.com/testcontainers/", "github.com/moby/", "github.com/docker/", "github.com/containerd/",
	"github.com/opencontainers/", "github.com/shirou/gopsutil", "github.com/sirupsen/logrus",
	"github.com/Microsoft/", "github.com/anishathalye/porcupine",
}

// storeClients are each store's client modules (prefixes).
var storeClients = map[string][]string{
	"redis": {"github.com/redis/go-redis"},
	"sql":   {"github.com/jackc/", "github.com/go-sql-driver/mysql"},
	"zk":    {"github.com/go-zookeeper/zk"},
	"etcd":  {"go.etcd.io/etcd", "google.golang.org/grpc"},
}

// memlockAllowed are the only modules memlock's test graph may hold: the
// library, the OpenTelemetry API and its dependencies.
var memlockAllowed = []string{
	rootPath, "go.opentelemetry.io/otel", "go.opentelemetry.io/otel/metric", "go.opentelemetry.io/otel/trace",
	"go.opentelemetry.io/auto/sdk", "github.com/go-logr/logr", "github.com/go-logr/stdr",
	"github.com/cespare/xxhash/v2",
}

func TestDriverTestGraphsHoldOnlyTheirStore(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	drivers := []struct{ pkg, store string }{
		{"./redislock/...", "redis"}, {"./redlock/...", "redis"}, {"./sqllock/...", "sql"}, {"./zklock/...", "zk"},
		{"./etcdlock/...", "etcd"}, {"./memlock/...", ""},
	}
	for _, d := range drivers {
		out, err := exec.Command(goTool, "list", "-deps", "-test", "-f", "{{with .Module}}{{.Path}}{{end}}", d.pkg).Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				t.Fatalf("go list %s: %v\n%s", d.pkg, err, ee.Stderr)
			}
			t.Fatalf("go list %s: %v", d.pkg, err)
		}
		mods := slices.Compact(slices.Sorted(strings.SplitSeq(strings.TrimSpace(string(out)), "\n")))
		if !slices.Contains(mods, rootPath) {
			t.Fatalf("go list -deps -test %s does not list the library module:\n%s", d.pkg, out)
		}
		for _, m := range mods {
			if d.store == "" {
				if !slices.Contains(memlockAllowed, m) {
					t.Errorf("%s: module %s in its test graph; memlock's may hold only %v", d.pkg, m, memlockAllowed)
				}
				continue
			}
			if hasPrefix(m, containerStack) {
				t.Errorf("%s: container stack module %s in its test graph (it reaches a user's go.sum)", d.pkg, m)
			}
			for store, clients := range storeClients {
				if store != d.store && hasPrefix(m, clients) {
					t.Errorf("%s: %s's client module %s in its test graph (it reaches a user's go.sum)", d.pkg, store, m)
				}
			}
		}
		t.Logf("%s: %d modules in its test graph", d.pkg, len(mods))
	}
}

func hasPrefix(s string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(s, p) })
}
