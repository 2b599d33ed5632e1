package distlock_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// backendPackages are the store packages: each imports backend, never the
// root package (docs/architecture.md, "Dependencies point one way").
var backendPackages = []string{"./backend/...", "./redislock/...", "./redlock/...", "./sqllock/...", "./zklock/...", "./etcdlock/...", "./memlock/..."}

const rootPath = "github.com/distlock/distlock"

// TestBackendsDoNotImportRoot: no backend package, nor anything it imports,
// imports the root package (test files aside). A driver that needs the
// root package's types is given what it needs through backend instead.
func TestBackendsDoNotImportRoot(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}"}, backendPackages...)
	out, err := exec.Command(goTool, args...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	seen := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg, imports := fields[0], fields[1:]
		if strings.HasPrefix(pkg, rootPath+"/") {
			seen++
		}
		if pkg == rootPath {
			t.Errorf("the root package is among the backends' dependencies")
		}
		if slices.Contains(imports, rootPath) {
			t.Errorf("%s imports the root package %s: drivers import backend only", pkg, rootPath)
		}
	}
	if seen < len(backendPackages) {
		t.Fatalf("go list listed %d of the project's packages, want at least %d:\n%s", seen, len(backendPackages), out)
	}
}
