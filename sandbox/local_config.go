package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
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
