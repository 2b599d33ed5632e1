package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
)

// installHint is the fix named when a local server binary is missing.
const installHint = "run scripts/install-servers.sh (as root) to install the Debian-packaged servers"

// localProvider runs the OS-packaged servers as local processes.
type localProvider struct {
	bins map[string]string // program name -> path
	// user is the user servers that refuse root run as (PostgreSQL), ""
	// for the current one.
	user string
}

func (*localProvider) name() string { return ProviderLocal }

// newLocalProvider checks that the programs kind needs are installed.
func newLocalProvider(kind Kind) (*localProvider, error) {
	if !localSupported {
		return nil, fmt.Errorf("%w: the local provider needs a unix system", ErrUnavailable)
	}
	var progs []string
	switch kind {
	case Redis:
		progs = []string{"redis-server"}
	case MariaDB:
		progs = []string{"mariadbd", "mariadb-install-db"}
	case ZooKeeper:
		progs = []string{"java"}
	case Etcd:
		progs = []string{"etcd"}
	case Postgres:
		progs = []string{"postgres", "initdb"}
	}
	p := &localProvider{bins: make(map[string]string)}
	if kind == Postgres && os.Geteuid() == 0 {
		// postgres and initdb refuse to run as root.
		if _, err := user.Lookup(postgresOSUser); err != nil {
			return nil, fmt.Errorf("%w: local postgres: running as root, and PostgreSQL refuses root: no user %q to run it as (%v); %s", ErrUnavailable, postgresOSUser, err, installHint)
		}
		p.user = postgresOSUser
	}
	if kind == Etcd {
		if bin := os.Getenv(EnvEtcdBin); bin != "" {
			if err := checkProgram(bin); err != nil {
				return nil, fmt.Errorf("%w: local etcd: %s=%s: %v", ErrUnavailable, EnvEtcdBin, bin, err)
			}
			p.bins["etcd"] = bin
			return p, nil
		}
	}
	for _, prog := range progs {
		path, err := findProgram(prog)
		if err != nil && kind == Postgres {
			path, err = findPostgresProgram(prog)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: local %s: %v; %s", ErrUnavailable, kind, err, installHint)
		}
		p.bins[prog] = path
	}
	if kind == ZooKeeper {
		if _, err := os.Stat(zookeeperJar); err != nil {
			return nil, fmt.Errorf("%w: local zookeeper: %v; %s", ErrUnavailable, err, installHint)
		}
	}
	return p, nil
}

// findProgram looks a program up in PATH and then in the sbin directories,
// which are not in every user's PATH (mariadbd lives in /usr/sbin).
func findProgram(prog string) (string, error) {
	if path, err := exec.LookPath(prog); err == nil {
		return path, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/sbin"} {
		path := filepath.Join(dir, prog)
		if checkProgram(path) == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH or sbin", prog)
}

// postgresOSUser is the user the local provider runs PostgreSQL as when
// the sandbox runs as root: the one Debian's postgresql-common creates.
const postgresOSUser = "postgres"

// findPostgresProgram looks a PostgreSQL server program up where Debian
// keeps it, outside PATH: /usr/lib/postgresql/<major>/bin, newest major
// first.
func findPostgresProgram(prog string) (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	major := func(dir string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
		return n
	}
	sort.Slice(dirs, func(i, j int) bool { return major(dirs[i]) > major(dirs[j]) })
	for _, dir := range dirs {
		path := filepath.Join(dir, prog)
		if checkProgram(path) == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH, sbin or /usr/lib/postgresql/*/bin", prog)
}

// checkProgram checks that path is an executable regular file.
func checkProgram(path string) error {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return err
	case !st.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", path)
	case st.Mode()&0o111 == 0:
		return fmt.Errorf("%s is not executable", path)
	}
	return nil
}

// startTries bounds the starts of one group whose ports were taken by
// another process between freePorts and the servers' bind.
const startTries = 3

// start creates a temporary directory, configures one process per node and
// starts them all at once (ensemble members need each other to come up).
// A start that fails because a port was taken meanwhile is tried again on
// new ports, up to startTries times.
func (p *localProvider) start(ctx context.Context, spec Spec) ([]member, func(context.Context) error, error) {
	for try := 1; ; try++ {
		members, release, err := p.startOnce(ctx, spec)
		if !portTaken(err) || try == startTries || ctx.Err() != nil {
			return members, release, err
		}
		spec.Logf("sandbox: a port of %s was taken before the server bound it; starting again on new ports", spec.Kind)
	}
}

// startOnce is one try of start.
func (p *localProvider) startOnce(ctx context.Context, spec Spec) ([]member, func(context.Context) error, error) {
	root, err := os.MkdirTemp("", "distlock-sandbox-"+string(spec.Kind)+"-")
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: %w", err)
	}
	release := func(context.Context) error { return os.RemoveAll(root) }
	nodes, err := p.configure(spec, root)
	if err != nil {
		return nil, nil, errors.Join(err, release(ctx))
	}
	members := make([]member, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		members[i] = n
		wg.Go(func() { errs[i] = n.Start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, n := range nodes {
			err = errors.Join(err, n.close(ctx))
		}
		return nil, nil, errors.Join(err, release(ctx))
	}
	return members, release, nil
}

// configure allocates ports and directories and writes the configuration
// of every node of spec below root.
func (p *localProvider) configure(spec Spec, root string) ([]*procNode, error) {
	ports, err := freePorts(spec.Nodes * portsPerNode(spec))
	if err != nil {
		return nil, err
	}
	nodes := make([]*procNode, spec.Nodes)
	for i := range nodes {
		dir := filepath.Join(root, spec.nodeName(i))
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		nodes[i] = &procNode{
			name:    spec.nodeName(i),
			kind:    spec.Kind,
			quorum:  spec.quorum(),
			port:    ports[i*portsPerNode(spec)],
			dir:     dir,
			timeout: spec.StartTimeout,
			tls:     spec.tls.clientConfig(),
		}
	}
	if p.user != "" {
		// The server's user must reach its directory below root's
		// private temporary directory.
		if err := os.Chmod(root, 0o711); err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
	}
	cfg := localConfig{spec: spec, bins: p.bins, user: p.user, nodes: nodes, ports: ports}
	for i := range nodes {
		if err := cfg.node(i); err != nil {
			return nil, err
		}
	}
	return nodes, nil
}

// portsPerNode is how many ports each node of spec listens on.
func portsPerNode(spec Spec) int {
	switch {
	case spec.Kind == ZooKeeper:
		return 3 // client, quorum, leader election
	case spec.Kind == Etcd:
		return 2 // client, peer
	case spec.Kind == Redis && spec.Topology == Cluster:
		return 2 // client, cluster bus
	}
	return 1
}
