package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/sandbox"
)

// TestConformanceModuleEtcd runs the conformance suite and the queue tests
// once more against the etcd server of the go.etcd.io/etcd/server/v3
// version the bench module (bench/, whose distlock-bench embeds it) requires
// (3.7), built from the module cache by the
// go command and run by the local provider: the Debian package and the
// substitute images are etcd 3.4, so this is what covers etcd ≥ 3.5 with
// no extra install. The binary is built once per version and kept under
// the user cache directory. With DISTLOCK_ETCD_BIN set every etcd test
// already runs that binary, and this test is skipped.
func TestConformanceModuleEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an etcd server: skipped in -short mode")
	}
	if bin := os.Getenv(sandbox.EnvEtcdBin); bin != "" {
		t.Skipf("%s=%s: every etcd test runs it", sandbox.EnvEtcdBin, bin)
	}
	bin := moduleEtcd(t)
	t.Setenv(sandbox.EnvEtcdBin, bin)
	c := &cluster{g: sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Etcd, Provider: sandbox.ProviderLocal})}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := c.client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := cli.Status(ctx, c.g.Addrs()[0])
	cli.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !atLeast(st.Version, 3, 5) {
		t.Fatalf("%s is etcd %s, want 3.5 or newer", bin, st.Version)
	}
	t.Logf("etcd %s (%s)", st.Version, bin)
	t.Run("Conformance", func(t *testing.T) {
		conformance.Run(t, func(context.Context, *testing.T) (conformance.Harness, error) {
			return newHarness(c, "conformance-module/"), nil
		}, conformance.Parallel(4))
	})
	for _, near := range []int{2, 1} {
		t.Run(fmt.Sprintf("FIFO/near=%d", near), func(t *testing.T) { testFIFO(t, c, near) })
		t.Run(fmt.Sprintf("WaiterKeyDeleted/near=%d", near), func(t *testing.T) { testWaiterKeyDeleted(t, c, near) })
	}
}

// atLeast reports whether version ("3.7.3") is at least major.minor.
func atLeast(version string, major, minor int) bool {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	return err1 == nil && err2 == nil && (ma > major || ma == major && mi >= minor)
}

// cmdModule is the bench module, whose go.mod requires the etcd server
// (distlock-bench embeds one; the library's go.mod does not, to stay free
// of server dependencies).
var cmdModule = filepath.Join("..", "bench")

// moduleEtcd returns the etcd server binary of the go.etcd.io/etcd/server/v3
// version in bench/go.mod, building it on first use into
// <user cache>/distlock/etcd-<version>/etcd.
func moduleEtcd(t *testing.T) string {
	t.Helper()
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command in PATH to build etcd with (set %s to an etcd binary instead): %v", sandbox.EnvEtcdBin, err)
	}
	if _, err := os.Stat(filepath.Join(cmdModule, "go.mod")); err != nil {
		t.Skipf("no %s/go.mod to take the etcd server from (set %s to an etcd binary instead): %v", cmdModule, sandbox.EnvEtcdBin, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, gocmd, "-C", cmdModule, "list", "-m", "-f", "{{.Version}}", "go.etcd.io/etcd/server/v3").Output()
	if err != nil {
		t.Fatalf("go list -m go.etcd.io/etcd/server/v3: %v", exitErr(err))
	}
	version := strings.TrimSpace(string(out))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "distlock", "etcd-"+version)
	bin := filepath.Join(dir, "etcd")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Build next to the final name and rename, so a concurrent test
	// process never runs a half-written binary.
	tmp, err := os.CreateTemp(dir, "etcd-build-")
	if err != nil {
		t.Fatal(err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	start := time.Now()
	build := exec.CommandContext(ctx, gocmd, "-C", cmdModule, "build", "-o", tmp.Name(), "go.etcd.io/etcd/server/v3")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build go.etcd.io/etcd/server/v3@%s: %v\n%s", version, err, out)
	}
	if err := os.Rename(tmp.Name(), bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("built etcd %s in %v: %s", version, time.Since(start).Round(time.Second), bin)
	return bin
}

// exitErr adds a failed command's standard error to err.
func exitErr(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return err
}
