package sandbox

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// groupSignal is a signal sent to a server's process group.
type groupSignal int

const (
	sigKill groupSignal = iota
	sigTerm
	sigStop
	sigCont
	sigInt
)

// stopGrace is how long Stop waits for a clean shutdown before SIGKILL.
const stopGrace = 30 * time.Second

// procNode is a server run as a local process group. It owns the process
// and the goroutine that reaps it; close ends both.
type procNode struct {
	name    string
	kind    Kind
	quorum  bool   // member of an ensemble: Start waits for liveness only
	port    int    // client port on 127.0.0.1
	busPort int    // Redis Cluster bus port, else 0
	dir     string // working directory, holds the data and the log
	argv    []string
	// prepare, when set, runs before each start (e.g. initialising a
	// MariaDB data directory the first time).
	prepare func(ctx context.Context) error
	timeout time.Duration
	tls     *tls.Config // client TLS of a TLS group, else nil
	// user, when set, is the user the server runs as (the sandbox runs
	// as root and the server refuses to).
	user string
	// interruptStop makes Stop send SIGINT to the leader only instead of
	// SIGTERM to the group: PostgreSQL's fast shutdown (SIGTERM is its
	// smart shutdown, which waits for every client to leave).
	interruptStop bool
	// ownGroups says that the server's children leave its process group
	// (PostgreSQL's backends call setsid): signals reach them one by one,
	// found through /proc on Linux.
	ownGroups bool

	mu     sync.Mutex
	run    *procRun // current process, nil when none was started
	paused bool
}

// procRun is one run of the server process.
type procRun struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has been reaped
	err    error         // Wait's result, readable after exited is closed
}

func (r *procRun) running() bool {
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

func (n *procNode) Name() string { return n.name }

func (n *procNode) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

func (n *procNode) logPath() string { return n.dir + "/server.log" }

func (n *procNode) peer(context.Context) (string, int, int, error) {
	return "127.0.0.1", n.port, n.busPort, nil
}

// Start launches the server unless it runs, then waits until it answers.
func (n *procNode) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.run != nil && n.run.running() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	if n.prepare != nil {
		if err := n.prepare(ctx); err != nil {
			return fmt.Errorf("sandbox: prepare %s: %w", n.name, err)
		}
	}
	run, err := n.launch()
	if err != nil {
		return fmt.Errorf("sandbox: start %s: %w", n.name, err)
	}
	n.run, n.paused = run, false
	err = waitUntil(ctx, func(ctx context.Context) error {
		if !run.running() {
			return errors.New("server exited")
		}
		if n.quorum {
			return probeLive(ctx, n.kind, n.Addr(), n.tls)
		}
		return probeServing(ctx, n.kind, n.Addr(), n.tls)
	})
	if err == nil {
		return nil
	}
	if !run.running() {
		err = fmt.Errorf("server exited (%v)", run.err)
	}
	return fmt.Errorf("sandbox: start %s at %s: %w\n%s", n.name, n.Addr(), err, n.logTail())
}

// launch starts the process in its own group with output to the log file,
// and a goroutine that reaps it.
func (n *procNode) launch() (*procRun, error) {
	logf, err := os.OpenFile(n.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	fmt.Fprintf(logf, "=== sandbox: %s %q\n", time.Now().Format(time.RFC3339Nano), n.argv)
	cmd := exec.Command(n.argv[0], n.argv[1:]...)
	cmd.Dir = n.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = procAttr()
	if n.user != "" {
		if err := runAs(cmd, n.user); err != nil {
			return nil, err
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	run := &procRun{cmd: cmd, exited: make(chan struct{})}
	go func() {
		run.err = cmd.Wait()
		close(run.exited)
	}()
	return run, nil
}

// Kill sends SIGKILL to the process group and waits until it is reaped.
func (n *procNode) Kill(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.kill(ctx)
}

func (n *procNode) kill(ctx context.Context) error {
	if n.run == nil || !n.run.running() {
		// Reaped already: its pid, and so its group id, may belong to
		// another process by now.
		return nil
	}
	kids, err := n.signal(sigKill)
	if err != nil {
		return fmt.Errorf("sandbox: kill %s: %w", n.name, err)
	}
	n.paused = false
	if err := n.awaitExit(ctx); err != nil {
		return err
	}
	// Children in groups of their own are orphans now: wait until they
	// are gone too, so that a new start finds nothing of the old server
	// (PostgreSQL refuses to start while its old shared memory is in use).
	return waitUntil(ctx, func(context.Context) error {
		for _, k := range kids {
			if !exited(k) {
				return fmt.Errorf("process %d of %s still runs", k, n.name)
			}
		}
		return nil
	})
}

// signal sends s to the server's process group and, when its children
// leave the group (ownGroups), to each of them; it returns those children.
// For a kill or a stop the leader is stopped first, so that it forks no
// child while they are looked up.
func (n *procNode) signal(s groupSignal) ([]int, error) {
	pid := n.run.cmd.Process.Pid
	if !n.ownGroups {
		return nil, signalGroup(pid, s)
	}
	if s == sigKill || s == sigStop {
		if err := signalGroup(pid, sigStop); err != nil {
			return nil, err
		}
	}
	kids := descendants(pid)
	err := signalGroup(pid, s)
	for _, k := range kids {
		err = errors.Join(err, signalOne(k, s))
	}
	return kids, err
}

// Stop resumes a paused server, sends SIGTERM (SIGINT to a PostgreSQL
// postmaster) and waits for it to exit, killing it after stopGrace.
func (n *procNode) Stop(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.run == nil || !n.run.running() {
		return nil
	}
	pid := n.run.cmd.Process.Pid
	stop := func() error { return signalGroup(pid, sigTerm) }
	if n.interruptStop {
		stop = func() error { return signalOne(pid, sigInt) }
	}
	_, cont := n.signal(sigCont)
	if err := errors.Join(cont, stop()); err != nil {
		return fmt.Errorf("sandbox: stop %s: %w", n.name, err)
	}
	n.paused = false
	grace, cancel := context.WithTimeout(ctx, stopGrace)
	defer cancel()
	if n.awaitExit(grace) == nil {
		// Children that outlived the leader go too.
		return signalGroup(pid, sigKill)
	}
	return n.kill(ctx)
}

// awaitExit waits until the current process has been reaped.
func (n *procNode) awaitExit(ctx context.Context) error {
	select {
	case <-n.run.exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sandbox: %s did not exit: %w", n.name, ctx.Err())
	}
}

// Pause sends SIGSTOP to the process group.
func (n *procNode) Pause(context.Context) error { return n.signalRunning(sigStop, true) }

// Resume sends SIGCONT to the process group.
func (n *procNode) Resume(context.Context) error { return n.signalRunning(sigCont, false) }

func (n *procNode) signalRunning(s groupSignal, paused bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.run == nil || !n.run.running() {
		return fmt.Errorf("sandbox: %s is not running", n.name)
	}
	kids, err := n.signal(s)
	if err != nil {
		return fmt.Errorf("sandbox: signal %s: %w", n.name, err)
	}
	settled(n.run.cmd.Process.Pid, s)
	for _, k := range kids {
		settled(k, s)
	}
	n.paused = paused
	return nil
}

// close kills the server for good; the group removes the directory.
func (n *procNode) close(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.kill(ctx)
}

// logTail returns the end of the server's log, for error messages.
func (n *procNode) logTail() string {
	return tailFile(n.logPath(), 30)
}

// tailFile returns the last lines of a file, indented, or a note that it
// cannot be read.
func tailFile(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "  (no log: " + err.Error() + ")"
	}
	return indentTail(data, lines)
}

// indentTail returns the last lines of data, each indented, prefixed by a
// header line.
func indentTail(data []byte, lines int) string {
	data = bytes.TrimRight(data, "\n")
	parts := bytes.Split(data, []byte("\n"))
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	var b bytes.Buffer
	b.WriteString("  --- last log lines ---")
	for _, p := range parts {
		b.WriteString("\n  ")
		b.Write(p)
	}
	return b.String()
}
