package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// The docker provider drives the engine through the container broker,
// sandbox/containers: a module of its own (so that testcontainers-go and
// the Docker client stay out of the library's go.mod, and out of the
// go.sum of every user of a driver whose tests import the sandbox), run
// as a child process that speaks JSON lines on stdin/stdout (its package
// documentation has the protocol). The broker removes every container and
// network it made when its stdin closes, so a test process that dies
// (even of SIGKILL) leaves nothing running.

// EnvBroker names a built container broker to run instead of building
// sandbox/containers from the repository's sources
// (go build -o broker ./sandbox/containers, run in the repository).
const EnvBroker = "DISTLOCK_SANDBOX_BROKER"

const (
	libraryModule = "github.com/distlock/distlock"
	brokerDir     = "sandbox/containers" // in the repository
	brokerModule  = libraryModule + "/" + brokerDir
)

// brokerRequest and brokerReply are the protocol's lines.
type brokerRequest struct {
	ID         int64             `json:"id"`
	Op         string            `json:"op"`
	TimeoutMS  int64             `json:"timeout_ms,omitempty"`
	Image      string            `json:"image,omitempty"`
	Cmd        []string          `json:"cmd,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Port       string            `json:"port,omitempty"`
	HostPort   int               `json:"host_port,omitempty"`
	Local      bool              `json:"local,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	Network    string            `json:"network,omitempty"`
	Aliases    []string          `json:"aliases,omitempty"`
	Files      []containerFile   `json:"files,omitempty"`
	StopSignal string            `json:"stop_signal,omitempty"`
	Container  string            `json:"container,omitempty"`
	GraceMS    int64             `json:"grace_ms,omitempty"`
}

// containerFile is copied into a container before it starts: from
// HostPath on this host, or Content.
type containerFile struct {
	Path     string `json:"path"`
	HostPath string `json:"host_path,omitempty"`
	Content  []byte `json:"content,omitempty"`
	Mode     int64  `json:"mode"`
}

type brokerReply struct {
	ID         int64  `json:"id"`
	Error      string `json:"error,omitempty"`
	DaemonHost string `json:"daemon_host,omitempty"`
	Exists     bool   `json:"exists,omitempty"`
	Network    string `json:"network,omitempty"`
	Container  string `json:"container,omitempty"`
	Port       int    `json:"port,omitempty"`
	Running    bool   `json:"running,omitempty"`
	ExitCode   int    `json:"exit_code,omitempty"`
	IP         string `json:"ip,omitempty"`
	Logs       string `json:"logs,omitempty"`
}

// broker is a running container broker. One runs per process while any
// docker provider or group uses it (acquireBroker/release), so that no
// process or goroutine outlives the groups.
type broker struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tailBuffer
	done   chan struct{} // closed when the reply reader ends

	wmu sync.Mutex // serialises writes to stdin

	mu      sync.Mutex
	next    int64
	pending map[int64]chan brokerReply
	err     error // why the broker is gone, once it is
}

var brokers struct {
	mu   sync.Mutex
	b    *broker
	refs int
}

// acquireBroker returns the process's broker, starting it if none runs;
// the caller must release it once.
func acquireBroker(ctx context.Context) (*broker, error) {
	brokers.mu.Lock()
	defer brokers.mu.Unlock()
	if brokers.b != nil && brokers.b.alive() {
		brokers.refs++
		return brokers.b, nil
	}
	if brokers.b != nil { // died: let it go
		brokers.b.shutdown()
		brokers.b, brokers.refs = nil, 0
	}
	bin, err := brokerBinary(ctx)
	if err != nil {
		return nil, err
	}
	b, err := startBroker(bin)
	if err != nil {
		return nil, err
	}
	brokers.b, brokers.refs = b, 1
	return b, nil
}

// release gives up one reference; the last one stops the broker, which
// then removes whatever is left.
func (b *broker) release() {
	brokers.mu.Lock()
	defer brokers.mu.Unlock()
	if brokers.b != b {
		return
	}
	brokers.refs--
	if brokers.refs > 0 {
		return
	}
	brokers.b = nil
	b.shutdown()
}

// startBroker runs the broker binary bin.
func startBroker(bin string) (*broker, error) {
	cmd := exec.Command(bin)
	// Its own process group: a ^C meant for the test does not reach it
	// before it could clean up; it ends when its stdin closes.
	cmd.SysProcAttr = brokerProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	b := &broker{cmd: cmd, stdin: stdin, stderr: &tailBuffer{max: 64 << 10}, done: make(chan struct{}), pending: map[int64]chan brokerReply{}}
	cmd.Stderr = b.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: docker: start the container broker %s: %v", ErrUnavailable, bin, err)
	}
	go b.readReplies(stdout)
	return b, nil
}

// readReplies hands each reply to its caller until stdout ends.
func (b *broker) readReplies(stdout io.Reader) {
	defer close(b.done)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		var rep brokerReply
		if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
			continue
		}
		b.mu.Lock()
		ch := b.pending[rep.ID]
		delete(b.pending, rep.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- rep
		}
	}
	err := b.cmd.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = fmt.Errorf("sandbox: docker: the container broker exited (%v)%s", err, b.stderrTail())
	}
	for id, ch := range b.pending {
		close(ch)
		delete(b.pending, id)
	}
}

func (b *broker) alive() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err == nil
}

// shutdown closes the broker's stdin and waits (up to 3 minutes, the
// time its cleanup may take) for it to exit.
func (b *broker) shutdown() {
	b.mu.Lock()
	if b.err == nil {
		b.err = errors.New("sandbox: docker: the container broker was shut down")
	}
	b.mu.Unlock()
	b.wmu.Lock()
	_ = b.stdin.Close()
	b.wmu.Unlock()
	select {
	case <-b.done:
	case <-time.After(3 * time.Minute):
		_ = b.cmd.Process.Kill()
		<-b.done
	}
}

func (b *broker) stderrTail() string {
	tail := b.stderr.String()
	if tail == "" {
		return ""
	}
	return "\n" + indentTail([]byte(tail), 20)
}

// call sends req and waits for its reply, or for ctx. The op's timeout on
// the broker's side is ctx's deadline.
func (b *broker) call(ctx context.Context, req brokerRequest) (brokerReply, error) {
	if dl, ok := ctx.Deadline(); ok {
		req.TimeoutMS = max(time.Until(dl).Milliseconds(), 1)
	}
	ch := make(chan brokerReply, 1)
	b.mu.Lock()
	if b.err != nil {
		err := b.err
		b.mu.Unlock()
		return brokerReply{}, err
	}
	b.next++
	req.ID = b.next
	b.pending[req.ID] = ch
	b.mu.Unlock()
	line, err := json.Marshal(req)
	if err != nil {
		return brokerReply{}, err
	}
	b.wmu.Lock()
	_, err = b.stdin.Write(append(line, '\n'))
	b.wmu.Unlock()
	if err != nil {
		b.mu.Lock()
		delete(b.pending, req.ID)
		b.mu.Unlock()
		return brokerReply{}, fmt.Errorf("sandbox: docker: write to the container broker: %w", err)
	}
	select {
	case rep, ok := <-ch:
		if !ok {
			b.mu.Lock()
			defer b.mu.Unlock()
			return brokerReply{}, b.err
		}
		if rep.Error != "" {
			return rep, errors.New(rep.Error)
		}
		return rep, nil
	case <-ctx.Done():
		b.mu.Lock()
		delete(b.pending, req.ID)
		b.mu.Unlock()
		return brokerReply{}, ctx.Err()
	}
}

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

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = bytes.Clone(t.buf[over:])
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
