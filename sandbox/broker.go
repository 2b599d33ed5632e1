package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
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
