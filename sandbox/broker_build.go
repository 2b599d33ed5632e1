package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// EnvBroker names a built container broker to run instead of building
// sandbox/containers from the repository's sources
// (go build -o broker ./sandbox/containers, run in the repository).
const EnvBroker = "DISTLOCK_SANDBOX_BROKER"

const (
	libraryModule = "github.com/distlock/distlock"
	brokerDir     = "sandbox/containers" // in the repository
	brokerModule  = libraryModule + "/" + brokerDir
)

// brokerBinary returns the broker to run: DISTLOCK_SANDBOX_BROKER, or the
// one built from the repository's sandbox/containers into the user cache
// directory, building it (once per version of its sources) if needed.
func brokerBinary(ctx context.Context) (string, error) {
	if bin := os.Getenv(EnvBroker); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("%w: docker: %s: %v", ErrUnavailable, EnvBroker, err)
		}
		return bin, nil
	}
	src, err := brokerSource()
	if err != nil {
		return "", err
	}
	sum, err := hashSources(src)
	if err != nil {
		return "", fmt.Errorf("%w: docker: read the container broker's sources: %v", ErrUnavailable, err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "distlock-sandbox")
	bin := filepath.Join(dir, "broker-"+sum)
	if _, err := os.Stat(bin); err == nil {
		now := time.Now()
		_ = os.Chtimes(bin, now, now) // in use: see pruneBrokers
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("%w: docker: cache directory for the container broker: %v", ErrUnavailable, err)
	}
	// One build at a time across processes (go test runs packages in
	// parallel): the others wait for it and use its result.
	unlock, err := lockPath(filepath.Join(dir, "build.lock"))
	if err != nil {
		return "", fmt.Errorf("%w: docker: lock %s: %v", ErrUnavailable, dir, err)
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("%w: docker: no go command in PATH to build the container broker (%s) with: add Go's bin directory to PATH, or set %s to a built broker", ErrUnavailable, src, EnvBroker)
	}
	tmp := fmt.Sprintf("%s.tmp%d", bin, os.Getpid())
	// The first build on a machine with an empty build cache compiles
	// testcontainers-go and Docker's client: it gets its own bound rather
	// than the caller's (a test's start bound), so that it is not cut
	// short and started again by every waiting test.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, goBin, "build", "-o", tmp, ".")
	build.Dir = src
	build.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("%w: docker: build the container broker (go build in %s): %v\n%s", ErrUnavailable, src, err, indentTail(out, 20))
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", fmt.Errorf("%w: docker: %v", ErrUnavailable, err)
	}
	pruneBrokers(dir, bin)
	return bin, nil
}

// pruneBrokers removes the brokers in dir other than keep that no process
// has used for a week (builds of sources since changed).
func pruneBrokers(dir, keep string) {
	old, _ := filepath.Glob(filepath.Join(dir, "broker-*"))
	for _, f := range old {
		if st, err := os.Stat(f); err == nil && f != keep && time.Since(st.ModTime()) > 7*24*time.Hour {
			_ = os.Remove(f)
		}
	}
}

// brokerSource finds sandbox/containers of the repository: next to this
// package's source file (when built from a checkout), else under the
// directory, the working directory or one of its parents, whose go.mod is
// that of module github.com/distlock/distlock.
func brokerSource() (string, error) {
	var starts []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	wd, err := os.Getwd()
	if err == nil {
		starts = append(starts, wd)
	}
	for _, start := range starts {
		if root, ok := findModuleRoot(start, libraryModule); ok {
			src := filepath.Join(root, filepath.FromSlash(brokerDir))
			if modulePath(filepath.Join(src, "go.mod")) == brokerModule {
				return src, nil
			}
			return "", fmt.Errorf("%w: docker: %s has no %s (go.mod of module %s): the container broker's sources are missing; restore them, or set %s to a built broker",
				ErrUnavailable, root, brokerDir, brokerModule, EnvBroker)
		}
	}
	return "", fmt.Errorf("%w: docker: cannot find the container broker's sources: no go.mod of module %s in %s or a parent directory; run from a checkout of the repository, or set %s to a broker built there (go build -o broker ./%s)",
		ErrUnavailable, libraryModule, strings.Join(starts, " or "), EnvBroker, brokerDir)
}

// findModuleRoot walks up from dir to the directory whose go.mod declares
// module mod.
func findModuleRoot(dir, mod string) (string, bool) {
	for range 64 {
		if modulePath(filepath.Join(dir, "go.mod")) == mod {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", false
}

// modulePath returns the module path declared by the go.mod file at path,
// or "".
func modulePath(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module"); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// hashSources hashes the broker's go.mod, go.sum and Go files, and the Go
// version: the cached binary's name.
func hashSources(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && (n == "go.mod" || n == "go.sum" || strings.HasSuffix(n, ".go")) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", n, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
