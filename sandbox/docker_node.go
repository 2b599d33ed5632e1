package sandbox

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	mobynet "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// containerNode is a server in a container. The group owns it; close
// removes the container and its volumes.
type containerNode struct {
	name    string
	kind    Kind
	port    string // client port inside the container, "6379/tcp"
	busPort int    // Redis Cluster bus port inside the container, else 0
	host    string // host of the published port
	network string // group network name, "" for the default bridge
	cli     *testcontainers.DockerClient
	timeout time.Duration
	tls     *tls.Config // client TLS of a TLS group, else nil

	addr atomic.Pointer[string] // current host:port

	mu     sync.Mutex // serialises lifecycle calls
	ctr    *testcontainers.DockerContainer
	paused bool
}

func (n *containerNode) Name() string { return n.name }

func (n *containerNode) Addr() string {
	if a := n.addr.Load(); a != nil {
		return *a
	}
	return ""
}

// create runs the container and records its address. On error the
// container, if any, is kept for close to remove.
func (n *containerNode) create(ctx context.Context, image string, opts []testcontainers.ContainerCustomizer) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	ctr, err := testcontainers.Run(ctx, image, opts...)
	n.ctr = ctr
	if err != nil {
		return fmt.Errorf("sandbox: docker: start %s: %w%s", n.name, err, n.logTail())
	}
	return n.refreshAddr(ctx)
}

// refreshAddr looks the published port up again: it changes when a
// container is started again.
func (n *containerNode) refreshAddr(ctx context.Context) error {
	port, err := n.ctr.MappedPort(ctx, n.port)
	if err != nil {
		return fmt.Errorf("sandbox: docker: published port of %s: %w", n.name, err)
	}
	addr := net.JoinHostPort(n.host, strconv.Itoa(int(port.Num())))
	n.addr.Store(&addr)
	return nil
}

// Start starts a stopped or killed container and waits until the server
// answers; the published port may differ from before.
func (n *containerNode) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	state, err := n.ctr.State(ctx)
	if err != nil {
		return fmt.Errorf("sandbox: docker: state of %s: %w", n.name, err)
	}
	if state.Running {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	if err := n.ctr.Start(ctx); err != nil {
		return fmt.Errorf("sandbox: docker: start %s: %w%s", n.name, err, n.logTail())
	}
	return n.refreshAddr(ctx)
}

// Kill sends SIGKILL to the container's processes.
func (n *containerNode) Kill(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.kill(ctx)
}

func (n *containerNode) kill(ctx context.Context) error {
	if err := n.unpause(ctx); err != nil {
		return err
	}
	_, err := n.cli.ContainerKill(ctx, n.ctr.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"})
	if err != nil && !isNotRunning(err) {
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
	grace := stopGrace
	if err := n.ctr.Stop(ctx, &grace); err != nil {
		return fmt.Errorf("sandbox: docker: stop %s: %w", n.name, err)
	}
	return nil
}

// awaitStopped waits until the engine reports the container not running.
func (n *containerNode) awaitStopped(ctx context.Context) error {
	return waitUntil(ctx, func(ctx context.Context) error {
		state, err := n.ctr.State(ctx)
		if err != nil {
			return err
		}
		if state.Running {
			return errors.New("still running")
		}
		return nil
	})
}

// Pause freezes the container (cgroup freezer).
func (n *containerNode) Pause(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, err := n.cli.ContainerPause(ctx, n.ctr.GetContainerID(), client.ContainerPauseOptions{}); err != nil {
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
	if _, err := n.cli.ContainerUnpause(ctx, n.ctr.GetContainerID(), client.ContainerUnpauseOptions{}); err != nil {
		return fmt.Errorf("sandbox: docker: unpause %s: %w", n.name, err)
	}
	n.paused = false
	return nil
}

// peer returns the container's address on the group network.
func (n *containerNode) peer(ctx context.Context) (string, int, int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ip, err := n.ctr.ContainerIP(ctx)
	if err != nil {
		return "", 0, 0, err
	}
	if ip == "" {
		return "", 0, 0, fmt.Errorf("%s has no address on the group network", n.name)
	}
	port, err := mobynet.ParsePort(n.port)
	if err != nil {
		return "", 0, 0, err
	}
	return ip, int(port.Num()), n.busPort, nil
}

// close removes the container and its volumes.
func (n *containerNode) close(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctr == nil {
		return nil
	}
	err := n.unpause(ctx)
	return errors.Join(err, n.ctr.Terminate(ctx))
}

// logTail returns the end of the container's output, for error messages.
func (n *containerNode) logTail() string {
	if n.ctr == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return containerLogTail(ctx, n.ctr)
}

// containerLogTail returns the end of a container's output, on a new line,
// or a note saying why it cannot.
func containerLogTail(ctx context.Context, ctr interface {
	Logs(context.Context) (io.ReadCloser, error)
}) string {
	rc, err := ctr.Logs(ctx)
	if err != nil {
		return "\n  (no log: " + err.Error() + ")"
	}
	defer rc.Close()
	data, _ := io.ReadAll(io.LimitReader(rc, 1<<20))
	return "\n" + indentTail(data, 30)
}

// isNotRunning reports the engine's refusal to kill a container that is
// not running (already killed or stopped).
func isNotRunning(err error) bool {
	return errdefs.IsConflict(err) || strings.Contains(err.Error(), "is not running")
}

// publishOn publishes port on the loopback interface only (for a local
// engine), on hostPort when non-zero, else on a port the engine picks.
func publishOn(port string, hostPort int, local bool) func(*container.HostConfig) {
	return func(hc *container.HostConfig) {
		p, err := mobynet.ParsePort(port)
		if err != nil {
			return // WithExposedPorts reports the bad port
		}
		b := mobynet.PortBinding{HostPort: ""}
		if hostPort != 0 {
			b.HostPort = strconv.Itoa(hostPort)
		}
		if local {
			b.HostIP = netip.MustParseAddr("127.0.0.1")
		}
		if hc.PortBindings == nil {
			hc.PortBindings = mobynet.PortMap{}
		}
		hc.PortBindings[p] = []mobynet.PortBinding{b}
	}
}

// probeStrategy is a testcontainers wait strategy that speaks the server's
// protocol on the published port: liveness for ensemble members, serving
// otherwise. A container that exits fails the wait at once.
type probeStrategy struct {
	kind   Kind
	port   string
	host   string
	quorum bool
	tls    *tls.Config
}

// WaitUntilReady implements wait.Strategy.
func (s *probeStrategy) WaitUntilReady(ctx context.Context, target wait.StrategyTarget) error {
	var exited error
	err := waitUntil(ctx, func(ctx context.Context) error {
		state, err := target.State(ctx)
		if err != nil {
			return err
		}
		if !state.Running {
			exited = fmt.Errorf("container exited with code %d", state.ExitCode)
			return nil
		}
		port, err := target.MappedPort(ctx, s.port)
		if err != nil {
			return err
		}
		addr := net.JoinHostPort(s.host, strconv.Itoa(int(port.Num())))
		if s.quorum {
			return probeLive(ctx, s.kind, addr, s.tls)
		}
		return probeServing(ctx, s.kind, addr, s.tls)
	})
	if exited != nil {
		return exited
	}
	return err
}
