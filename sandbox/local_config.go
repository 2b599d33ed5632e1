package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Paths of the Debian-packaged ZooKeeper jars.
const (
	zookeeperJar = "/usr/share/java/zookeeper.jar"
	// slf4jBinding makes ZooKeeper's log visible; used when present.
	slf4jBinding = "/usr/share/java/slf4j-simple.jar"
)

// Timings shared by both providers, short so that fault tests run fast.
const (
	zkTickMillis     = 250   // ZooKeeper tickTime
	zkInitLimit      = 40    // ticks for a follower to sync with the leader (10 s)
	zkSyncLimit      = 10    // ticks a follower may lag (2.5 s)
	zkMinSessionMs   = 500   // smallest session timeout granted
	zkMaxSessionMs   = 60000 // largest session timeout granted
	etcdHeartbeatMs  = 100
	etcdElectionMs   = 1000
	redisNodeTimeout = 2000 // Redis Cluster node timeout, ms
	// redisFailoverNodeTimeout is the node timeout of a cluster with
	// replicas (ms): a replica takes over about 1.5-2.5 s after its primary
	// died.
	redisFailoverNodeTimeout = 1000
	zkJVMFlags               = "-Xms32m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1"
)

// localConfig writes the command line and configuration of local nodes.
type localConfig struct {
	spec  Spec
	bins  map[string]string
	user  string // user PostgreSQL runs as, "" for the current one
	nodes []*procNode
	ports []int // portsPerNode(spec) consecutive entries per node
}

// port returns the j-th port of node i.
func (c localConfig) port(i, j int) int { return c.ports[i*portsPerNode(c.spec)+j] }

func (c localConfig) node(i int) error {
	switch c.spec.Kind {
	case Redis:
		c.redis(i)
	case MariaDB:
		return c.mariadb(i)
	case ZooKeeper:
		return c.zookeeper(i)
	case Etcd:
		c.etcd(i)
	case Postgres:
		return c.postgres(i)
	}
	return nil
}

func (c localConfig) redis(i int) {
	n := c.nodes[i]
	port := []string{"--port", strconv.Itoa(n.port)}
	if c.spec.tls != nil {
		port = redisTLSArgs(c.spec.tls.dir, n.port)
	}
	n.argv = append(append([]string{c.bins["redis-server"],
		"--bind", "127.0.0.1", "--dir", filepath.Join(n.dir, "data"),
		"--daemonize", "no", "--logfile", ""}, port...), redisArgs(c.spec)...)
	switch c.spec.Topology {
	case Replica:
		if i > 0 {
			n.argv = append(n.argv, "--replicaof", "127.0.0.1", strconv.Itoa(c.nodes[0].port))
		}
	case Cluster:
		n.busPort = c.port(i, 1)
		n.argv = append(n.argv, "--cluster-port", strconv.Itoa(n.busPort))
	}
}

// redisArgs are the settings every sandbox Redis gets, in both providers.
func redisArgs(spec Spec) []string {
	args := []string{"--protected-mode", "no"}
	if !spec.Stock {
		args = append(args, "--save", "")
	}
	if spec.Persistent {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	if spec.Topology == Replica {
		// Replicas sync at once instead of after the default 5 s delay.
		args = append(args, "--repl-diskless-sync-delay", "0")
	}
	if spec.Topology == Cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.Itoa(spec.clusterNodeTimeout()))
	}
	return args
}

func (c localConfig) mariadb(i int) error {
	n := c.nodes[i]
	data := filepath.Join(n.dir, "data")
	initFile := filepath.Join(n.dir, "init.sql")
	if err := os.WriteFile(initFile, []byte(mariadbInitSQL()), 0o600); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	user := []string{}
	if os.Geteuid() == 0 {
		user = []string{"--user=root"} // mariadbd refuses to run as root otherwise
	}
	install := append([]string{c.bins["mariadb-install-db"], "--no-defaults", "--datadir=" + data,
		"--auth-root-authentication-method=normal", "--skip-test-db"}, user...)
	n.prepare = func(ctx context.Context) error {
		if _, err := os.Stat(filepath.Join(data, "mysql")); err == nil {
			return nil
		}
		cmd := exec.CommandContext(ctx, install[0], install[1:]...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("mariadb-install-db: %w\n%s", err, indentTail(out, 20))
		}
		return nil
	}
	n.argv = append([]string{c.bins["mariadbd"], "--no-defaults", "--datadir=" + data,
		"--port=" + strconv.Itoa(n.port), "--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(n.dir, "mysqld.sock"), "--pid-file=" + filepath.Join(n.dir, "mysqld.pid"),
		"--skip-name-resolve", "--init-file=" + initFile}, append(mariadbArgs(c.spec), user...)...)
	if f := c.spec.MariaDBTLS; f != nil {
		n.argv = append(n.argv, f.args(f.CA, f.Cert, f.Key)...)
	}
	return nil
}

// mariadbInitSQL runs at every start (--init-file); every statement is
// idempotent. It gives root the sandbox password from any host and creates
// the sandbox database.
func mariadbInitSQL() string {
	pw := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(RootPassword)
	return strings.Join([]string{
		"CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY '" + pw + "';",
		"ALTER USER 'root'@'%' IDENTIFIED BY '" + pw + "';",
		"GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;",
		"ALTER USER IF EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '" + pw + "';",
		"ALTER USER IF EXISTS 'root'@'::1' IDENTIFIED BY '" + pw + "';",
		"CREATE DATABASE IF NOT EXISTS `" + Database + "`;",
	}, "\n") + "\n"
}

func (c localConfig) zookeeper(i int) error {
	n := c.nodes[i]
	data := filepath.Join(n.dir, "data")
	lines := []string{
		"dataDir=" + data,
		"clientPort=" + strconv.Itoa(n.port),
		"clientPortAddress=127.0.0.1",
	}
	jvmFlags := zkJVMFlags
	if c.spec.tls != nil {
		// TLS only: no plaintext client port.
		lines = []string{
			"dataDir=" + data,
			"secureClientPort=" + strconv.Itoa(n.port),
			"secureClientPortAddress=127.0.0.1",
		}
		lines = append(lines, zookeeperTLSSettings(c.spec.tls.dir)...)
		jvmFlags += " " + zkTLSJVMFlags
	}
	lines = append(lines, zookeeperSettings(c.spec)...)
	if c.spec.Nodes > 1 {
		for j := range c.nodes {
			lines = append(lines, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", j+1, c.port(j, 1), c.port(j, 2)))
		}
	}
	cfg := filepath.Join(n.dir, "zoo.cfg")
	if err := os.WriteFile(cfg, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(i+1)+"\n"), 0o644); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	classpath := zookeeperJar
	if _, err := os.Stat(slf4jBinding); err == nil {
		classpath += ":" + slf4jBinding
	}
	n.argv = append(append([]string{c.bins["java"]}, strings.Fields(jvmFlags)...),
		"-cp", classpath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg)
	return nil
}

// zookeeperSettings are the zoo.cfg lines every sandbox ZooKeeper gets
// besides its addresses: a short tick so that short session timeouts are
// allowed (Debian's defaults with spec.Stock), no admin server, the
// four-letter words the probes use.
func zookeeperSettings(spec Spec) []string {
	t := zkTimingsOf(spec)
	lines := []string{
		"tickTime=" + strconv.Itoa(t.tick),
		"initLimit=" + strconv.Itoa(t.initLimit),
		"syncLimit=" + strconv.Itoa(t.syncLimit),
	}
	if !spec.Stock {
		lines = append(lines,
			"minSessionTimeout="+strconv.Itoa(zkMinSessionMs),
			"maxSessionTimeout="+strconv.Itoa(zkMaxSessionMs))
	}
	return append(lines, "admin.enableServer=false", "4lw.commands.whitelist=srvr,ruok,mntr,stat")
}

// zkTimings are a ZooKeeper server's tick and the limits counted in ticks.
type zkTimings struct{ tick, initLimit, syncLimit int }

// zkTimingsOf returns the sandbox's short timings, or Debian's defaults
// (its zoo.cfg: tickTime=2000, initLimit=10, syncLimit=5) for a Stock spec.
func zkTimingsOf(spec Spec) zkTimings {
	if spec.Stock {
		return zkTimings{tick: 2000, initLimit: 10, syncLimit: 5}
	}
	return zkTimings{tick: zkTickMillis, initLimit: zkInitLimit, syncLimit: zkSyncLimit}
}

// mariadbArgs are the settings every sandbox MariaDB gets beyond its
// addresses, in both providers: a smaller buffer pool than the default
// 128 MiB (many servers run at once in tests), none for a Stock spec.
func mariadbArgs(spec Spec) []string {
	if spec.Stock {
		return nil
	}
	return []string{"--innodb-buffer-pool-size=64M"}
}

func (c localConfig) etcd(i int) {
	n := c.nodes[i]
	client := "http://127.0.0.1:" + strconv.Itoa(n.port)
	peers := make([]string, len(c.nodes))
	for j, m := range c.nodes {
		peers[j] = m.name + "=http://127.0.0.1:" + strconv.Itoa(c.port(j, 1))
	}
	peer := "http://127.0.0.1:" + strconv.Itoa(c.port(i, 1))
	n.argv = append([]string{c.bins["etcd"],
		"--name", n.name, "--data-dir", filepath.Join(n.dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", strings.Join(peers, ",")}, etcdArgs()...)
}

// etcdArgs are the settings every sandbox etcd member gets, in both
// providers: short heartbeat and election timeouts for fast fault tests.
func etcdArgs() []string {
	return []string{
		"--initial-cluster-state", "new",
		"--initial-cluster-token", "distlock-sandbox",
		"--heartbeat-interval", strconv.Itoa(etcdHeartbeatMs),
		"--election-timeout", strconv.Itoa(etcdElectionMs),
		"--logger", "zap", "--log-outputs", "stderr",
	}
}

// postgres configures a PostgreSQL node: initdb (once, as the server's
// user) with a password-authenticated superuser and the sandbox database,
// then the postmaster on 127.0.0.1 with its socket in the node directory
// and the sandbox's pg_hba.conf.
func (c localConfig) postgres(i int) error {
	n := c.nodes[i]
	n.user, n.interruptStop, n.ownGroups = c.user, true, true
	data := filepath.Join(n.dir, "data")
	ready := filepath.Join(n.dir, "initialised")
	pwfile := filepath.Join(n.dir, "pwfile")
	hba := filepath.Join(n.dir, "pg_hba.conf")
	owned := []string{n.dir, data}
	files := map[string]string{pwfile: PostgresPassword + "\n", hba: postgresHBA(c.spec.tls != nil)}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		owned = append(owned, path)
	}
	tlsDir := ""
	if c.spec.tls != nil {
		// Copies the server's user can read (the group's TLS directory is
		// private to this user); the key must be the server user's and
		// 0600, or PostgreSQL refuses it.
		tlsDir = n.dir
		for _, f := range []string{tlsCAFile, tlsServerCertFile, tlsServerKeyFile} {
			b, err := os.ReadFile(filepath.Join(c.spec.tls.dir, f))
			if err != nil {
				return fmt.Errorf("sandbox: %w", err)
			}
			dst := filepath.Join(n.dir, f)
			if err := os.WriteFile(dst, b, 0o600); err != nil {
				return fmt.Errorf("sandbox: %w", err)
			}
			owned = append(owned, dst)
		}
	}
	if c.user != "" {
		if err := chownTo(c.user, owned...); err != nil {
			return fmt.Errorf("sandbox: postgres files for user %s: %w", c.user, err)
		}
	}
	initdb := append([]string{c.bins["initdb"], "-D", data, "--pwfile=" + pwfile, "--username=" + PostgresUser}, postgresInitdbArgs()...)
	single := []string{c.bins["postgres"], "--single", "-D", data, "postgres"}
	n.prepare = func(ctx context.Context) error {
		if _, err := os.Stat(ready); err == nil {
			return nil
		}
		// A first start interrupted half-way left a partial cluster:
		// start over on an empty directory.
		if err := errors.Join(os.RemoveAll(data), os.Mkdir(data, 0o700)); err != nil {
			return err
		}
		if c.user != "" {
			if err := chownTo(c.user, data); err != nil {
				return err
			}
		}
		if err := runAsUser(ctx, c.user, initdb, ""); err != nil {
			return err
		}
		// Single-user mode: no server, no socket, no authentication.
		if err := runAsUser(ctx, c.user, single, "CREATE DATABASE "+Database+";\n"); err != nil {
			return err
		}
		return os.WriteFile(ready, nil, 0o644)
	}
	n.argv = append([]string{c.bins["postgres"], "-D", data, "-p", strconv.Itoa(n.port), "-k", n.dir,
		"-c", "listen_addresses=127.0.0.1"}, postgresArgs(n.dir, tlsDir)...)
	return nil
}

// runAsUser runs argv (as user, unless "") with input on its standard
// input; the error carries the end of its output.
func runAsUser(ctx context.Context, user string, argv []string, input string) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = procAttr()
	if user != "" {
		if err := runAs(cmd, user); err != nil {
			return err
		}
	}
	cmd.Stdin = strings.NewReader(input)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", filepath.Base(argv[0]), err, indentTail(out, 20))
	}
	return nil
}

// postgresInitdbArgs are the initdb options of every sandbox PostgreSQL
// besides its directory, superuser and password file, in both providers
// (a container's entrypoint gets them as POSTGRES_INITDB_ARGS, next to
// POSTGRES_USER and POSTGRES_PASSWORD): password authentication, UTF-8
// with the C.UTF-8 locale (present in every glibc, unlike a language's).
func postgresInitdbArgs() []string {
	return []string{"--auth=scram-sha-256", "--encoding=UTF8", "--locale=C.UTF-8"}
}

// postgresArgs are the postmaster settings of every sandbox PostgreSQL
// besides its data directory and addresses, in both providers: the
// sandbox's pg_hba.conf (in dir) and, when tlsDir is set, TLS with the
// files in tlsDir (slash-separated, local or in a container). Nothing of
// postgresql.conf is changed: a [Spec.Stock] server is the same.
func postgresArgs(dir, tlsDir string) []string {
	args := []string{"-c", "hba_file=" + path.Join(dir, "pg_hba.conf")}
	if tlsDir != "" {
		args = append(args,
			"-c", "ssl=on",
			"-c", "ssl_cert_file="+path.Join(tlsDir, tlsServerCertFile),
			"-c", "ssl_key_file="+path.Join(tlsDir, tlsServerKeyFile),
			// A client certificate is asked for, and checked when one is
			// presented; pg_hba.conf does not require one.
			"-c", "ssl_ca_file="+path.Join(tlsDir, tlsCAFile))
	}
	return args
}

// postgresHBA is the sandbox's pg_hba.conf: a password (scram-sha-256)
// for every user and database, on the socket and over TCP from anywhere
// (the server listens on loopback only, or in a container); with tls,
// TCP clients must use TLS (hostssl).
func postgresHBA(tls bool) string {
	host := "host"
	if tls {
		host = "hostssl"
	}
	return "# distlock sandbox\n" +
		"local all all scram-sha-256\n" +
		host + " all all all scram-sha-256\n"
}
