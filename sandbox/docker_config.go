package sandbox

import (
	"fmt"
	"strconv"
	"strings"
)

// containerPlan is the container of one node: the full server command line
// (so official and substitute images run the same thing), environment,
// client port and network alias.
type containerPlan struct {
	name     string // node name, also its alias on the group network
	cmd      []string
	env      map[string]string
	port     string // client port inside the container, "6379/tcp"
	hostPort int    // fixed published port, 0 for one the engine picks
	busPort  int    // Redis Cluster bus port inside the container
	// files are copied into the container before it starts.
	files []containerFile
	// stopSignal, when set, replaces the image's stop signal.
	stopSignal string
}

// containerTLSDir is where the files of Spec.MariaDBTLS are copied.
const containerTLSDir = "/etc/distlock-sandbox-tls"

// Ports inside the containers (the images' defaults).
const (
	redisPort     = 6379
	mariadbPort   = 3306
	postgresPort  = 5432
	zkClientPort  = 2181
	etcdPort      = 2379
	etcdPeerPort  = 2380
	redisBusShift = 10000 // Redis Cluster bus port = client port + 10000
)

// plan returns the container of every node of spec.
func (p *dockerProvider) plan(spec Spec, networked bool) ([]containerPlan, error) {
	plans := make([]containerPlan, spec.Nodes)
	var hostPorts []int
	if spec.Topology == Cluster {
		// Redis Cluster announces its client port to clients, so the
		// published port must be known before the server starts.
		var err error
		if hostPorts, err = freePorts(spec.Nodes); err != nil {
			return nil, err
		}
	}
	for i := range plans {
		pl := containerPlan{name: spec.nodeName(i), env: map[string]string{}}
		switch spec.Kind {
		case Redis:
			p.redisPlan(&pl, spec, i, hostPorts)
		case MariaDB:
			pl.port = portSpec(mariadbPort)
			pl.cmd = append([]string{mariadbCommand(p.image), "--skip-name-resolve"}, mariadbArgs(spec)...)
			if f := spec.MariaDBTLS; f != nil {
				pl.cmd = append(pl.cmd, f.args(containerTLSDir+"/ca.pem", containerTLSDir+"/cert.pem", containerTLSDir+"/key.pem")...)
			}
			for _, prefix := range []string{"MARIADB_", "MYSQL_"} {
				pl.env[prefix+"ROOT_PASSWORD"] = RootPassword
				pl.env[prefix+"DATABASE"] = Database
			}
		case Postgres:
			pl.port = portSpec(postgresPort)
			pl.cmd, pl.files = postgresContainer(spec)
			pl.env = map[string]string{
				"POSTGRES_USER":        PostgresUser,
				"POSTGRES_PASSWORD":    PostgresPassword,
				"POSTGRES_DB":          Database,
				"POSTGRES_INITDB_ARGS": strings.Join(postgresInitdbArgs(), " "),
			}
			pl.stopSignal = "SIGINT" // fast shutdown, as the official image's STOPSIGNAL
		case ZooKeeper:
			zookeeperPlan(&pl, spec, i)
		case Etcd:
			pl.port = portSpec(etcdPort)
			pl.cmd = etcdCommand(spec, i, networked)
		}
		plans[i] = pl
	}
	return plans, nil
}

// redisPlan fills in the container of Redis node i: on a cluster, it
// listens on its published port hostPorts[i].
func (p *dockerProvider) redisPlan(pl *containerPlan, spec Spec, i int, hostPorts []int) {
	listen := redisPort
	if spec.Topology == Cluster {
		// A cluster node announces its own port both to clients
		// (on this host) and to its replicas (on the group
		// network): it listens on the published port, so that
		// one number works for both.
		listen = hostPorts[i]
		pl.hostPort, pl.busPort = listen, redisPort+redisBusShift
	}
	pl.port = portSpec(listen)
	port := []string{"--port", strconv.Itoa(listen)}
	if spec.tls != nil {
		port = redisTLSArgs(tlsContainerDir, listen)
	}
	pl.cmd = append(append(append([]string{"redis-server"}, port...), "--dir", "/data"), redisArgs(spec)...)
	switch spec.Topology {
	case Replica:
		if i > 0 {
			pl.cmd = append(pl.cmd, "--replicaof", spec.nodeName(0), strconv.Itoa(redisPort))
		}
	case Cluster:
		pl.cmd = append(pl.cmd,
			"--cluster-port", strconv.Itoa(pl.busPort),
			"--cluster-announce-hostname", p.host,
			"--cluster-preferred-endpoint-type", "hostname")
	}
}

// zookeeperPlan fills in the container of ZooKeeper node i.
func zookeeperPlan(pl *containerPlan, spec Spec, i int) {
	pl.port = portSpec(zkClientPort)
	pl.cmd = []string{"zkServer.sh", "start-foreground"}
	pl.env = zookeeperEnv(spec, i)
	if spec.tls != nil {
		// Clients reach only the TLS port; the plaintext one
		// stays inside the container, unpublished.
		pl.port = portSpec(zkSecureClientPort)
		pl.env["ZOO_CFG_EXTRA"] += " " + strings.Join(append([]string{
			"secureClientPort=" + strconv.Itoa(zkSecureClientPort),
		}, zookeeperTLSSettings(tlsContainerDir)...), " ")
		pl.env["JVMFLAGS"] += " " + zkTLSJVMFlags
	}
}

// Paths of a PostgreSQL container's sandbox files.
const (
	postgresContainerDir = "/distlock-postgres" // pg_hba.conf
	// postgresContainerTLSDir holds copies of the TLS files owned by the
	// postgres user, the key with mode 0600: PostgreSQL refuses a key
	// others can read, and the copies in tlsContainerDir are root's.
	postgresContainerTLSDir = "/var/lib/postgresql/distlock-tls"
)

// postgresContainer returns the command of a PostgreSQL container and the
// files it needs: the images' entrypoint (docker-entrypoint.sh, which
// initialises the cluster from the POSTGRES_* variables and runs the
// server as the postgres user) with the sandbox's pg_hba.conf, on every
// interface of the container. With TLS a shell first copies the TLS files
// for the postgres user, then runs the same entrypoint.
func postgresContainer(spec Spec) ([]string, []containerFile) {
	files := []containerFile{{
		Content: []byte(postgresHBA(spec.tls != nil)),
		Path:    postgresContainerDir + "/pg_hba.conf",
		Mode:    0o644,
	}}
	tlsDir := ""
	if spec.tls != nil {
		tlsDir = postgresContainerTLSDir
	}
	cmd := append([]string{"postgres", "-c", "listen_addresses=*"}, postgresArgs(postgresContainerDir, tlsDir)...)
	if spec.tls == nil {
		return cmd, files
	}
	src := make([]string, 0, 3)
	for _, f := range []string{tlsCAFile, tlsServerCertFile, tlsServerKeyFile} {
		src = append(src, tlsContainerDir+"/"+f)
	}
	script := "install -d -o postgres -g postgres -m 700 " + postgresContainerTLSDir +
		" && install -o postgres -g postgres -m 600 " + strings.Join(src, " ") + " " + postgresContainerTLSDir +
		` && exec docker-entrypoint.sh "$@"`
	return append([]string{"sh", "-c", script, "sh"}, cmd...), files
}

func portSpec(port int) string { return strconv.Itoa(port) + "/tcp" }

// mariadbCommand is the server program of image: mysqld for MySQL images,
// mariadbd otherwise.
func mariadbCommand(image string) string {
	if strings.Contains(strings.ToLower(image), "mysql") {
		return "mysqld"
	}
	return "mariadbd"
}

// zookeeperEnv configures node i through the variables of the official
// image's entrypoint (which the substitute image's entrypoint honours too).
func zookeeperEnv(spec Spec, i int) map[string]string {
	t := zkTimingsOf(spec)
	env := map[string]string{
		"ZOO_MY_ID":                  strconv.Itoa(i + 1),
		"ZOO_TICK_TIME":              strconv.Itoa(t.tick),
		"ZOO_INIT_LIMIT":             strconv.Itoa(t.initLimit),
		"ZOO_SYNC_LIMIT":             strconv.Itoa(t.syncLimit),
		"ZOO_ADMINSERVER_ENABLED":    "false",
		"ZOO_4LW_COMMANDS_WHITELIST": "srvr,ruok,mntr,stat",
		"ZOO_STANDALONE_ENABLED":     strconv.FormatBool(spec.Nodes == 1),
		"ZOO_CFG_EXTRA": fmt.Sprintf("minSessionTimeout=%d maxSessionTimeout=%d quorumListenOnAllIPs=true",
			zkMinSessionMs, zkMaxSessionMs),
		"JVMFLAGS": zkJVMFlags,
	}
	if spec.Stock {
		env["ZOO_CFG_EXTRA"] = "quorumListenOnAllIPs=true"
	}
	if spec.Nodes > 1 {
		servers := make([]string, spec.Nodes)
		for j := range servers {
			servers[j] = fmt.Sprintf("server.%d=%s:2888:3888;%d", j+1, spec.nodeName(j), zkClientPort)
		}
		env["ZOO_SERVERS"] = strings.Join(servers, " ")
	}
	return env
}

// etcdCommand is the full etcd command line of node i. Members reach each
// other by their aliases on the group network; a single member uses
// 127.0.0.1 (a name that resolves would have to match its own address).
func etcdCommand(spec Spec, i int, networked bool) []string {
	self := "127.0.0.1"
	if networked {
		self = spec.nodeName(i)
	}
	peers := make([]string, spec.Nodes)
	for j := range peers {
		host := "127.0.0.1"
		if networked {
			host = spec.nodeName(j)
		}
		peers[j] = fmt.Sprintf("%s=http://%s:%d", spec.nodeName(j), host, etcdPeerPort)
	}
	return append([]string{"/usr/local/bin/etcd",
		"--name", spec.nodeName(i), "--data-dir", "/var/lib/etcd/data",
		"--listen-client-urls", fmt.Sprintf("http://0.0.0.0:%d", etcdPort),
		"--advertise-client-urls", fmt.Sprintf("http://%s:%d", self, etcdPort),
		"--listen-peer-urls", fmt.Sprintf("http://0.0.0.0:%d", etcdPeerPort),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://%s:%d", self, etcdPeerPort),
		"--initial-cluster", strings.Join(peers, ","),
	}, etcdArgs()...)
}
