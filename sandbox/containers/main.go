// Command containers is the sandbox's container broker: the docker
// provider of package github.com/distlock/distlock/sandbox starts it as a
// child process and drives the Docker engine through testcontainers-go by
// it, so that the library module (whose packages' tests import the
// sandbox) carries no container stack in its go.mod, and no user of a
// driver gets one in its go.sum.
//
// It is a module of its own (github.com/distlock/distlock/sandbox/containers)
// that the sandbox builds once into the user cache directory
// (os.UserCacheDir()/distlock-sandbox/), keyed by a hash of these sources;
// DISTLOCK_SANDBOX_BROKER names a binary to run instead.
//
// # Protocol
//
// One JSON object per line each way. Requests on stdin carry an id and an
// op; the reply on stdout carries the same id, and "error" when the op
// failed. Requests run concurrently; replies come in any order.
//
//	info                                 -> daemon_host
//	image {image}                        -> exists
//	network_create {labels}              -> network
//	network_remove {network}
//	run {image, cmd, env, port, host_port, local, labels, network,
//	     aliases, files, stop_signal}    -> container, port
//	start {container}                    -> port
//	state {container}                    -> running, exit_code
//	stop {container, grace_ms}         (SIGKILL after grace_ms)
//	kill {container}
//	pause {container} / unpause {container}
//	ip {container}                       -> ip
//	logs {container}                     -> logs (the last 1 MiB)
//	exec {container, cmd}                -> exit_code, logs
//	terminate {container}
//
// timeout_ms bounds an op (default 5 minutes). A run that fails after the
// container was created still names it in "container", so that the
// caller can read its logs; the broker removes it at exit either way.
//
// When stdin closes (the process that started the broker exited, or died
// of SIGKILL) or on SIGTERM, SIGINT or SIGHUP, the broker removes every
// container and network it created and exits: nothing is left running.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	mobynet "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/testcontainers/testcontainers-go/network"
)

// request is one line on stdin.
type request struct {
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
	Files      []file            `json:"files,omitempty"`
	StopSignal string            `json:"stop_signal,omitempty"`
	Container  string            `json:"container,omitempty"`
	GraceMS    int64             `json:"grace_ms,omitempty"`
}

// file is copied into a container before it starts: from HostPath on this
// host, or Content.
type file struct {
	Path     string `json:"path"`
	HostPath string `json:"host_path,omitempty"`
	Content  []byte `json:"content,omitempty"`
	Mode     int64  `json:"mode"`
}

// reply is one line on stdout.
type reply struct {
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

// broker owns the engine client and everything it created.
type broker struct {
	logger tclog.Logger
	ctx    context.Context // every op's parent, canceled at shutdown
	cancel context.CancelFunc

	mu         sync.Mutex
	cli        *testcontainers.DockerClient
	containers map[string]*testcontainers.DockerContainer
	networks   map[string]*testcontainers.DockerNetwork
	closing    bool
}

func main() {
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	log.SetPrefix("sandbox broker: ")
	// The reaper image cannot be pulled everywhere; the broker removes
	// what it made itself.
	if _, set := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !set {
		_ = os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &broker{
		ctx:        ctx,
		cancel:     cancel,
		logger:     log.New(os.Stderr, "sandbox broker: testcontainers: ", log.Ltime),
		containers: map[string]*testcontainers.DockerContainer{},
		networks:   map[string]*testcontainers.DockerNetwork{},
	}
	// Once the process that started the broker is gone, stdout and stderr
	// are pipes without a reader: a write there must fail (EPIPE), not end
	// the broker with SIGPIPE before it has removed what it made, as Go
	// does for fds 1 and 2 unless SIGPIPE is notified.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	eof := make(chan struct{})
	out := json.NewEncoder(os.Stdout)
	var outMu sync.Mutex
	var inflight sync.WaitGroup
	go func() {
		defer close(eof)
		in := bufio.NewScanner(os.Stdin)
		in.Buffer(make([]byte, 64<<10), 64<<20)
		for in.Scan() {
			var req request
			if err := json.Unmarshal(in.Bytes(), &req); err != nil {
				log.Printf("bad request line: %v", err)
				continue
			}
			inflight.Go(func() {
				rep := b.handle(req)
				rep.ID = req.ID
				outMu.Lock()
				defer outMu.Unlock()
				if err := out.Encode(rep); err != nil {
					log.Printf("write reply: %v", err)
				}
			})
		}
	}()
	select {
	case <-eof:
	case s := <-sigs:
		log.Printf("%v: removing what the broker made", s)
	}
	// Ops still running are canceled, and what they make is removed as
	// soon as they return; then everything else.
	b.mu.Lock()
	b.closing = true
	b.mu.Unlock()
	b.cancel()
	inflight.Wait()
	b.cleanup()
	os.Exit(0)
}

// handle runs one request under its timeout.
func (b *broker) handle(req request) (rep reply) {
	timeout := 5 * time.Minute
	if req.TimeoutMS > 0 {
		timeout = time.Duration(req.TimeoutMS) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := b.do(ctx, req, &rep); err != nil {
		rep.Error = err.Error()
	}
	return rep
}

// client returns the engine client, connecting on first use.
func (b *broker) client(ctx context.Context) (*testcontainers.DockerClient, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cli != nil {
		return b.cli, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("no docker engine reachable: %w", err)
	}
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("no docker engine reachable: %w", err)
	}
	b.cli = cli
	return cli, nil
}

// ctr returns the container named by req.
func (b *broker) ctr(req request) (*testcontainers.DockerContainer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.containers[req.Container]
	if !ok {
		return nil, fmt.Errorf("no container %q made by this broker", req.Container)
	}
	return c, nil
}

// ops are the requests the broker knows.
var ops = map[string]bool{
	"info": true, "image": true, "network_create": true, "network_remove": true, "run": true,
	"start": true, "state": true, "stop": true, "kill": true, "pause": true, "unpause": true,
	"ip": true, "logs": true, "exec": true, "terminate": true,
}

func (b *broker) do(ctx context.Context, req request, rep *reply) error {
	if !ops[req.Op] {
		return fmt.Errorf("unknown op %q", req.Op)
	}
	cli, err := b.client(ctx)
	if err != nil {
		return err
	}
	switch req.Op {
	case "info":
		rep.DaemonHost = cli.DaemonHost()
		return nil
	case "image":
		_, err := cli.ImageInspect(ctx, req.Image)
		switch {
		case err == nil:
			rep.Exists = true
		case errdefs.IsNotFound(err):
		default:
			return fmt.Errorf("inspect image %s: %w", req.Image, err)
		}
		return nil
	case "network_create":
		nw, err := network.New(ctx, network.WithLabels(req.Labels))
		if err != nil {
			return fmt.Errorf("create network: %w", err)
		}
		if !b.keepNetwork(nw) {
			return errors.New("the broker is shutting down")
		}
		rep.Network = nw.Name
		return nil
	case "network_remove":
		b.mu.Lock()
		nw, ok := b.networks[req.Network]
		delete(b.networks, req.Network)
		b.mu.Unlock()
		if !ok {
			return fmt.Errorf("no network %q made by this broker", req.Network)
		}
		return nw.Remove(ctx)
	case "run":
		return b.run(ctx, req, rep)
	}
	c, err := b.ctr(req)
	if err != nil {
		return err
	}
	switch req.Op {
	case "start":
		if err := c.Start(ctx); err != nil {
			return err
		}
		rep.Port, err = mappedPort(ctx, c, req.Port)
		return err
	case "state":
		st, err := c.State(ctx)
		if err != nil {
			return err
		}
		rep.Running, rep.ExitCode = st.Running, st.ExitCode
		return nil
	case "stop":
		grace := time.Duration(req.GraceMS) * time.Millisecond
		return c.Stop(ctx, &grace)
	case "kill":
		_, err := cli.ContainerKill(ctx, c.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"})
		if err != nil && !errdefs.IsConflict(err) && !strings.Contains(err.Error(), "is not running") {
			return err
		}
		return nil
	case "pause":
		_, err := cli.ContainerPause(ctx, c.GetContainerID(), client.ContainerPauseOptions{})
		return err
	case "unpause":
		_, err := cli.ContainerUnpause(ctx, c.GetContainerID(), client.ContainerUnpauseOptions{})
		return err
	case "ip":
		rep.IP, err = c.ContainerIP(ctx)
		return err
	case "logs":
		rep.Logs, err = logs(ctx, c)
		return err
	case "exec":
		code, r, err := c.Exec(ctx, req.Cmd, tcexec.Multiplexed())
		if err != nil {
			return err
		}
		data, _ := io.ReadAll(io.LimitReader(r, 1<<20))
		rep.ExitCode, rep.Logs = code, string(data)
		return nil
	case "terminate":
		b.mu.Lock()
		delete(b.containers, req.Container)
		b.mu.Unlock()
		return c.Terminate(ctx)
	}
	return fmt.Errorf("op %q not handled", req.Op)
}

// run creates and starts a container. A container created but failing to
// start is kept (for its logs, and removed at exit) and named in the reply.
func (b *broker) run(ctx context.Context, req request, rep *reply) error {
	opts := []testcontainers.ContainerCustomizer{
		testcontainers.WithLogger(b.logger),
		testcontainers.WithCmd(req.Cmd...),
		testcontainers.WithEnv(req.Env),
		testcontainers.WithExposedPorts(req.Port),
		testcontainers.WithHostConfigModifier(publishOn(req.Port, req.HostPort, req.Local)),
		testcontainers.WithLabels(req.Labels),
	}
	for _, f := range req.Files {
		cf := testcontainers.ContainerFile{HostFilePath: f.HostPath, ContainerFilePath: f.Path, FileMode: f.Mode}
		if f.HostPath == "" {
			cf.Reader = strings.NewReader(string(f.Content))
		}
		opts = append(opts, testcontainers.WithFiles(cf))
	}
	if req.StopSignal != "" {
		opts = append(opts, testcontainers.WithConfigModifier(func(c *container.Config) { c.StopSignal = req.StopSignal }))
	}
	if req.Network != "" {
		b.mu.Lock()
		nw, ok := b.networks[req.Network]
		b.mu.Unlock()
		if !ok {
			return fmt.Errorf("no network %q made by this broker", req.Network)
		}
		opts = append(opts, network.WithNetwork(req.Aliases, nw))
	}
	c, err := testcontainers.Run(ctx, req.Image, opts...)
	if c != nil {
		rep.Container = c.GetContainerID()
		if !b.keepContainer(c) {
			return errors.Join(errors.New("the broker is shutting down"), c.Terminate(context.Background()))
		}
	}
	if err != nil {
		return err
	}
	rep.Port, err = mappedPort(ctx, c, req.Port)
	return err
}

func (b *broker) keepContainer(c *testcontainers.DockerContainer) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		return false
	}
	b.containers[c.GetContainerID()] = c
	return true
}

func (b *broker) keepNetwork(nw *testcontainers.DockerNetwork) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		_ = nw.Remove(context.Background())
		return false
	}
	b.networks[nw.Name] = nw
	return true
}

// cleanup removes every container, then every network, the broker made.
func (b *broker) cleanup() {
	b.mu.Lock()
	b.closing = true
	ctrs, nws := b.containers, b.networks
	b.containers, b.networks = map[string]*testcontainers.DockerContainer{}, map[string]*testcontainers.DockerNetwork{}
	cli := b.cli
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for id, c := range ctrs {
		wg.Go(func() {
			if cli != nil {
				// Paused containers cannot be stopped: thaw first.
				_, _ = cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
			}
			if err := c.Terminate(ctx); err != nil {
				log.Printf("remove container %.12s: %v", id, err)
			}
		})
	}
	wg.Wait()
	for name, nw := range nws {
		if err := nw.Remove(ctx); err != nil {
			log.Printf("remove network %s: %v", name, err)
		}
	}
	if len(ctrs)+len(nws) > 0 {
		log.Printf("removed %d container(s) and %d network(s) left at exit", len(ctrs), len(nws))
	}
	if cli != nil {
		_ = cli.Close()
	}
}

// mappedPort returns the host port published for port ("6379/tcp").
func mappedPort(ctx context.Context, c *testcontainers.DockerContainer, port string) (int, error) {
	p, err := c.MappedPort(ctx, port)
	if err != nil {
		return 0, fmt.Errorf("published port %s: %w", port, err)
	}
	return int(p.Num()), nil
}

// logs returns the last MiB of a container's output.
func logs(ctx context.Context, c *testcontainers.DockerContainer) (string, error) {
	rc, err := c.Logs(ctx)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if len(data) > 1<<20 {
		data = data[len(data)-1<<20:]
	}
	return string(data), err
}

// publishOn publishes port on the loopback interface only (for a local
// engine), on hostPort when non-zero, else on a port the engine picks.
func publishOn(port string, hostPort int, local bool) func(*container.HostConfig) {
	return func(hc *container.HostConfig) {
		p, err := mobynet.ParsePort(port)
		if err != nil {
			return // WithExposedPorts reports the bad port
		}
		bind := mobynet.PortBinding{}
		if hostPort != 0 {
			bind.HostPort = strconv.Itoa(hostPort)
		}
		if local {
			bind.HostIP = netip.MustParseAddr("127.0.0.1")
		}
		if hc.PortBindings == nil {
			hc.PortBindings = mobynet.PortMap{}
		}
		hc.PortBindings[p] = []mobynet.PortBinding{bind}
	}
}
