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

// dockerProvider runs servers as containers through testcontainers-go,
// by the container broker (broker.go).
type dockerProvider struct {
	b     *broker // released by the group's release, or by start's failure
	image string
	host  string // host part of every address: 127.0.0.1 for a local engine
	local bool   // the engine runs on this host: publish on 127.0.0.1 only
}

func (*dockerProvider) name() string { return ProviderDocker }

// newDockerProvider starts (or shares) the broker, checks that an engine
// answers and picks the image for spec.Kind. Errors wrap ErrUnavailable
// and name the fix. The provider holds a reference to the broker until
// its start fails or the group it started is released; a provider that
// is not used must be closed.
func newDockerProvider(ctx context.Context, spec Spec) (*dockerProvider, error) {
	b, err := acquireBroker(ctx)
	if err != nil {
		return nil, err
	}
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	info, err := b.call(ictx, brokerRequest{Op: "info"})
	if err != nil {
		b.release()
		return nil, fmt.Errorf("%w: %v: start one (and `make images` if the server images are missing), or use %s=local", ErrUnavailable, err, EnvProvider)
	}
	p := &dockerProvider{b: b, host: "127.0.0.1", local: true}
	if u, err := url.Parse(info.DaemonHost); err == nil && u.Scheme == "tcp" && u.Hostname() != "" && u.Hostname() != "localhost" && u.Hostname() != "127.0.0.1" {
		p.host, p.local = u.Hostname(), false
	}
	setting, _ := ProviderSetting(spec)
	p.image, err = p.pickImage(ictx, spec.Kind, setting == ProviderDocker)
	if err != nil {
		b.release()
		return nil, err
	}
	return p, nil
}

// close gives up the provider's broker when it starts nothing.
func (p *dockerProvider) close() { p.b.release() }

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
	rep, err := p.b.call(ctx, brokerRequest{Op: "image", Image: img})
	if err != nil {
		return false, fmt.Errorf("%w: docker: %v", ErrUnavailable, err)
	}
	return rep.Exists, nil
}

// start creates the group's network if its nodes talk to each other, then
// every container at once (ensemble members need each other to come up).
func (p *dockerProvider) start(ctx context.Context, spec Spec) ([]member, func(context.Context) error, error) {
	labels := map[string]string{LabelSandbox: "1", labelKind: string(spec.Kind), labelPID: strconv.Itoa(os.Getpid())}
	nw := ""
	if spec.Nodes > 1 && (spec.quorum() || spec.Topology != Independent) {
		rep, err := p.b.call(ctx, brokerRequest{Op: "network_create", Labels: labels})
		if err != nil {
			p.close()
			return nil, nil, fmt.Errorf("sandbox: docker: create network: %w", err)
		}
		nw = rep.Network
	}
	release := func(ctx context.Context) error {
		var err error
		if nw != "" {
			if _, err = p.b.call(ctx, brokerRequest{Op: "network_remove", Network: nw}); err != nil {
				err = fmt.Errorf("sandbox: docker: remove network %s: %w", nw, err)
			}
		}
		p.close()
		return err
	}
	plans, err := p.plan(spec, nw != "")
	if err != nil {
		return nil, nil, errors.Join(err, release(ctx))
	}
	nodes := make([]*containerNode, spec.Nodes)
	errs := make([]error, spec.Nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		nodes[i] = p.newNode(spec, plans[i], nw)
		wg.Go(func() { errs[i] = nodes[i].create(ctx, p.request(spec, plans[i], nw, labels)) })
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
func (p *dockerProvider) newNode(spec Spec, plan containerPlan, nw string) *containerNode {
	return &containerNode{
		name:    plan.name,
		kind:    spec.Kind,
		port:    plan.port,
		busPort: plan.busPort,
		host:    p.host,
		network: nw,
		b:       p.b,
		timeout: spec.StartTimeout,
		tls:     spec.tls.clientConfig(),
		quorum:  spec.quorum(),
		logf:    spec.Logf,
	}
}

// request turns a plan into the broker's run request: image, command,
// environment, the client port published on the loopback interface,
// labels, files, network and alias.
func (p *dockerProvider) request(spec Spec, plan containerPlan, nw string, labels map[string]string) brokerRequest {
	req := brokerRequest{
		Op:         "run",
		Image:      p.image,
		Cmd:        plan.cmd,
		Env:        plan.env,
		Port:       plan.port,
		HostPort:   plan.hostPort,
		Local:      p.local,
		Labels:     labels,
		Files:      plan.files,
		StopSignal: plan.stopSignal,
	}
	if spec.tls != nil {
		for _, f := range tlsFileNames() {
			req.Files = append(req.Files, containerFile{HostPath: filepath.Join(spec.tls.dir, f), Path: tlsContainerDir + "/" + f, Mode: 0o644})
		}
	}
	if nw != "" {
		req.Network, req.Aliases = nw, []string{plan.name}
	}
	if f := spec.MariaDBTLS; f != nil {
		// World-readable: the server runs as its own user in the container;
		// these are throwaway test keys.
		req.Files = append(req.Files,
			containerFile{HostPath: f.CA, Path: containerTLSDir + "/ca.pem", Mode: 0o644},
			containerFile{HostPath: f.Cert, Path: containerTLSDir + "/cert.pem", Mode: 0o644},
			containerFile{HostPath: f.Key, Path: containerTLSDir + "/key.pem", Mode: 0o644},
		)
	}
	return req
}
