package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/testcontainers/testcontainers-go/network"
)

// imagesHint is the fix named when no image for a kind exists locally.
const imagesHint = "run `make images` (scripts/build-images.sh) to build substitute images offline"

// Labels put on every container and network the docker provider creates,
// besides testcontainers' own org.testcontainers=true;
// scripts/cleanup-containers.sh removes what carries them.
const (
	LabelSandbox = "distlock.sandbox" // value "1"
	labelKind    = "distlock.sandbox.kind"
	labelPID     = "distlock.sandbox.pid"
)

// dockerProvider runs servers as containers through testcontainers-go.
type dockerProvider struct {
	cli   *testcontainers.DockerClient
	image string
	host  string // host part of every address: 127.0.0.1 for a local engine
	local bool   // the engine runs on this host: publish on 127.0.0.1 only
}

func (*dockerProvider) name() string { return ProviderDocker }

// newDockerProvider connects to the engine and picks the image for
// spec.Kind. Errors wrap ErrUnavailable and name the fix.
func newDockerProvider(ctx context.Context, spec Spec) (*dockerProvider, error) {
	if err := ensureRyukDisabled(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: no docker engine reachable (%v): start one (and `make images` if the server images are missing), or use %s=local", ErrUnavailable, err, EnvProvider)
	}
	p := &dockerProvider{cli: cli, host: "127.0.0.1", local: true}
	if u, err := url.Parse(cli.DaemonHost()); err == nil && u.Scheme == "tcp" && u.Hostname() != "" && u.Hostname() != "localhost" && u.Hostname() != "127.0.0.1" {
		p.host, p.local = u.Hostname(), false
	}
	setting, _ := ProviderSetting(spec)
	p.image, err = p.pickImage(ctx, spec.Kind, setting == ProviderDocker)
	if err != nil {
		return nil, errors.Join(err, cli.Close())
	}
	return p, nil
}

// pickImage returns the image named by DISTLOCK_IMAGE_<KIND>, else the
// official image if present locally, else the substitute if present. The
// named image may be pulled (by testcontainers) only when the docker
// provider was asked for explicitly; the defaults are never pulled.
func (p *dockerProvider) pickImage(ctx context.Context, kind Kind, mayPull bool) (string, error) {
	if img := os.Getenv(imageEnv[kind]); img != "" {
		ok, err := p.hasImage(ctx, img)
		if err != nil || ok || mayPull {
			return img, err
		}
		return "", fmt.Errorf("%w: docker: image %s (from %s) is not present locally and auto mode does not pull", ErrUnavailable, img, imageEnv[kind])
	}
	for _, img := range []string{officialImage[kind], SubstituteImage(kind)} {
		ok, err := p.hasImage(ctx, img)
		if err != nil {
			return "", err
		}
		if ok {
			return img, nil
		}
	}
	return "", fmt.Errorf("%w: docker: no %s image: neither %s nor %s exists locally, and the sandbox does not pull: %s, or `docker pull %s`, or set %s",
		ErrUnavailable, kind, officialImage[kind], SubstituteImage(kind), imagesHint, officialImage[kind], imageEnv[kind])
}

func (p *dockerProvider) hasImage(ctx context.Context, img string) (bool, error) {
	_, err := p.cli.ImageInspect(ctx, img)
	switch {
	case err == nil:
		return true, nil
	case errdefs.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("%w: docker: inspect image %s: %v", ErrUnavailable, img, err)
}

// start creates the group's network if its nodes talk to each other, then
// every container at once (ensemble members need each other to come up).
func (p *dockerProvider) start(ctx context.Context, spec Spec) ([]member, func(context.Context) error, error) {
	labels := map[string]string{LabelSandbox: "1", labelKind: string(spec.Kind), labelPID: strconv.Itoa(os.Getpid())}
	var nw *testcontainers.DockerNetwork
	if spec.Nodes > 1 && (spec.quorum() || spec.Topology != Independent) {
		var err error
		if nw, err = network.New(ctx, network.WithLabels(labels)); err != nil {
			return nil, nil, errors.Join(fmt.Errorf("sandbox: docker: create network: %w", err), p.cli.Close())
		}
	}
	release := func(ctx context.Context) error {
		var err error
		if nw != nil {
			err = nw.Remove(ctx)
		}
		return errors.Join(err, p.cli.Close())
	}
	plans, err := p.plan(spec, nw)
	if err != nil {
		return nil, nil, errors.Join(err, release(ctx))
	}
	nodes := make([]*containerNode, spec.Nodes)
	errs := make([]error, spec.Nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		nodes[i] = p.newNode(spec, plans[i], nw)
		wg.Go(func() { errs[i] = nodes[i].create(ctx, p.image, p.options(spec, plans[i], nw, labels)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, n := range nodes {
			err = errors.Join(err, n.close(ctx))
		}
		return nil, nil, errors.Join(err, release(ctx))
	}
	members := make([]member, len(nodes))
	for i, n := range nodes {
		members[i] = n
	}
	return members, release, nil
}

// newNode returns the (not yet created) container node of plan.
func (p *dockerProvider) newNode(spec Spec, plan containerPlan, nw *testcontainers.DockerNetwork) *containerNode {
	n := &containerNode{
		name:    plan.name,
		kind:    spec.Kind,
		port:    plan.port,
		busPort: plan.busPort,
		host:    p.host,
		cli:     p.cli,
		timeout: spec.StartTimeout,
		tls:     spec.tls.clientConfig(),
	}
	if nw != nil {
		n.network = nw.Name
	}
	return n
}

// options turns a plan into testcontainers options: command, environment,
// the client port published on the loopback interface, labels, network,
// and a wait strategy that speaks the server's protocol.
func (p *dockerProvider) options(spec Spec, plan containerPlan, nw *testcontainers.DockerNetwork, labels map[string]string) []testcontainers.ContainerCustomizer {
	logger := tclog.Logger(loggerFunc(spec.Logf))
	opts := []testcontainers.ContainerCustomizer{
		testcontainers.WithLogger(logger),
		testcontainers.WithCmd(plan.cmd...),
		testcontainers.WithEnv(plan.env),
		testcontainers.WithExposedPorts(plan.port),
		testcontainers.WithHostConfigModifier(publishOn(plan.port, plan.hostPort, p.local)),
		testcontainers.WithLabels(labels),
		testcontainers.WithWaitStrategyAndDeadline(spec.StartTimeout, &probeStrategy{
			kind: spec.Kind, port: plan.port, host: p.host, quorum: spec.quorum(), tls: spec.tls.clientConfig(),
		}),
	}
	if spec.tls != nil {
		for _, f := range tlsFileNames() {
			opts = append(opts, testcontainers.WithFiles(testcontainers.ContainerFile{
				HostFilePath:      filepath.Join(spec.tls.dir, f),
				ContainerFilePath: tlsContainerDir + "/" + f,
				FileMode:          0o644,
			}))
		}
	}
	if len(plan.files) > 0 {
		opts = append(opts, testcontainers.WithFiles(plan.files...))
	}
	if plan.stopSignal != "" {
		opts = append(opts, testcontainers.WithConfigModifier(func(c *container.Config) { c.StopSignal = plan.stopSignal }))
	}
	if nw != nil {
		opts = append(opts, network.WithNetwork([]string{plan.name}, nw))
	}
	if f := spec.MariaDBTLS; f != nil {
		// World-readable: the server runs as its own user in the container;
		// these are throwaway test keys.
		opts = append(opts, testcontainers.WithFiles(
			testcontainers.ContainerFile{HostFilePath: f.CA, ContainerFilePath: containerTLSDir + "/ca.pem", FileMode: 0o644},
			testcontainers.ContainerFile{HostFilePath: f.Cert, ContainerFilePath: containerTLSDir + "/cert.pem", FileMode: 0o644},
			testcontainers.ContainerFile{HostFilePath: f.Key, ContainerFilePath: containerTLSDir + "/key.pem", FileMode: 0o644},
		))
	}
	return opts
}

// loggerFunc adapts a Logf function to testcontainers' logger.
type loggerFunc func(format string, args ...any)

func (f loggerFunc) Printf(format string, args ...any) { f(format, args...) }
