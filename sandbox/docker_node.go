package sandbox

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// containerNode is a server in a container, made and driven by the
// broker. The group owns it; close removes the container and its volumes.
type containerNode struct {
	name    string
	kind    Kind
	port    string // client port inside the container, "6379/tcp"
	busPort int    // Redis Cluster bus port inside the container, else 0
	host    string // host of the published port
	network string // group network name, "" for the default bridge
	b       *broker
	timeout time.Duration
	tls     *tls.Config // client TLS of a TLS group, else nil
	quorum  bool        // an ensemble member: wait for liveness only
	logf    func(format string, args ...any)

	addr atomic.Pointer[string] // current host:port

	mu     sync.Mutex // serialises lifecycle calls
	id     string     // container id, "" until created
	paused bool
}

func (n *containerNode) Name() string { return n.name }

func (n *containerNode) Addr() string {
	if a := n.addr.Load(); a != nil {
		return *a
	}
	return ""
}

// create runs the container, records its address and waits until the
// server answers. On error the container, if any, is kept for close to
// remove.
func (n *containerNode) create(ctx context.Context, req brokerRequest) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	rep, err := n.b.call(ctx, req)
	n.id = rep.Container
	if err != nil {
		return fmt.Errorf("sandbox: docker: start %s: %w%s", n.name, err, n.logTail())
	}
	n.setAddr(rep.Port)
	n.logf("sandbox: docker: %s is container %.12s (%s), published on %s", n.name, n.id, req.Image, n.Addr())
	return n.waitReady(ctx)
}

func (n *containerNode) setAddr(port int) {
	addr := net.JoinHostPort(n.host, strconv.Itoa(port))
	n.addr.Store(&addr)
}

// waitReady waits until the server speaks its protocol on the published
// port: liveness for ensemble members, serving otherwise. A container that
// exits fails the wait at once.
func (n *containerNode) waitReady(ctx context.Context) error {
	var exited error
	err := waitUntil(ctx, func(ctx context.Context) error {
		rep, err := n.b.call(ctx, brokerRequest{Op: "state", Container: n.id})
		if err != nil {
			return err
		}
		if !rep.Running {
			exited = fmt.Errorf("container exited with code %d", rep.ExitCode)
			return nil
		}
		if n.quorum {
			return probeLive(ctx, n.kind, n.Addr(), n.tls)
		}
		return probeServing(ctx, n.kind, n.Addr(), n.tls)
	})
	if exited != nil {
		err = exited
	}
	if err != nil {
		return fmt.Errorf("sandbox: docker: %s does not answer: %w%s", n.name, err, n.logTail())
	}
	return nil
}

// Start starts a stopped or killed container and waits until the server
// answers; the published port may differ from before.
func (n *containerNode) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	rep, err := n.b.call(ctx, brokerRequest{Op: "state", Container: n.id})
	if err != nil {
		return fmt.Errorf("sandbox: docker: state of %s: %w", n.name, err)
	}
	if rep.Running {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	if rep, err = n.b.call(ctx, brokerRequest{Op: "start", Container: n.id, Port: n.port}); err != nil {
		return fmt.Errorf("sandbox: docker: start %s: %w%s", n.name, err, n.logTail())
	}
	n.setAddr(rep.Port)
	return n.waitReady(ctx)
}

// Kill sends SIGKILL to the container's processes.
func (n *containerNode) Kill(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.unpause(ctx); err != nil {
		return err
	}
	if _, err := n.b.call(ctx, brokerRequest{Op: "kill", Container: n.id}); err != nil {
		return fmt.Errorf("sandbox: docker: kill %s: %w", n.name, err)
	}
	return n.awaitStopped(ctx)
}

// Stop stops the container cleanly (SIGTERM, SIGKILL after stopGrace).
func (n *containerNode) Stop(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.unpause(ctx); err != nil {
		return err
	}
	if _, err := n.b.call(ctx, brokerRequest{Op: "stop", Container: n.id, GraceMS: stopGrace.Milliseconds()}); err != nil {
		return fmt.Errorf("sandbox: docker: stop %s: %w", n.name, err)
	}
	return nil
}

// awaitStopped waits until the engine reports the container not running.
func (n *containerNode) awaitStopped(ctx context.Context) error {
	return waitUntil(ctx, func(ctx context.Context) error {
		rep, err := n.b.call(ctx, brokerRequest{Op: "state", Container: n.id})
		if err != nil {
			return err
		}
		if rep.Running {
			return errors.New("still running")
		}
		return nil
	})
}

// Pause freezes the container (cgroup freezer).
func (n *containerNode) Pause(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, err := n.b.call(ctx, brokerRequest{Op: "pause", Container: n.id}); err != nil {
		return fmt.Errorf("sandbox: docker: pause %s: %w", n.name, err)
	}
	n.paused = true
	return nil
}

// Resume thaws a paused container.
func (n *containerNode) Resume(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.paused {
		return fmt.Errorf("sandbox: docker: %s is not paused", n.name)
	}
	return n.unpause(ctx)
}

func (n *containerNode) unpause(ctx context.Context) error {
	if !n.paused {
		return nil
	}
	if _, err := n.b.call(ctx, brokerRequest{Op: "unpause", Container: n.id}); err != nil {
		return fmt.Errorf("sandbox: docker: unpause %s: %w", n.name, err)
	}
	n.paused = false
	return nil
}

// peer returns the container's address on the group network.
func (n *containerNode) peer(ctx context.Context) (string, int, int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	rep, err := n.b.call(ctx, brokerRequest{Op: "ip", Container: n.id})
	if err != nil {
		return "", 0, 0, err
	}
	if rep.IP == "" {
		return "", 0, 0, fmt.Errorf("%s has no address on the group network", n.name)
	}
	num, _, _ := strings.Cut(n.port, "/")
	port, err := strconv.Atoi(num)
	if err != nil {
		return "", 0, 0, fmt.Errorf("bad port %q: %w", n.port, err)
	}
	return rep.IP, port, n.busPort, nil
}

// close removes the container and its volumes.
func (n *containerNode) close(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.id == "" {
		return nil
	}
	err := n.unpause(ctx)
	if _, terr := n.b.call(ctx, brokerRequest{Op: "terminate", Container: n.id}); terr != nil {
		err = errors.Join(err, fmt.Errorf("sandbox: docker: remove %s: %w", n.name, terr))
	}
	n.id = ""
	return err
}

// logTail returns the end of the container's output, on a new line, or a
// note saying why it cannot, for error messages.
func (n *containerNode) logTail() string {
	if n.id == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rep, err := n.b.call(ctx, brokerRequest{Op: "logs", Container: n.id})
	if err != nil {
		return "\n  (no log: " + err.Error() + ")"
	}
	return "\n" + indentTail([]byte(rep.Logs), 30)
}
