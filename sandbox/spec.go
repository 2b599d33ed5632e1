package sandbox

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// Kind names a server type the sandbox can start.
type Kind string

// The server kinds.
const (
	Redis     Kind = "redis"
	MariaDB   Kind = "mariadb"
	ZooKeeper Kind = "zookeeper"
	Etcd      Kind = "etcd"
	Postgres  Kind = "postgres"
)

// Kinds lists every supported server kind.
func Kinds() []Kind { return []Kind{Redis, MariaDB, ZooKeeper, Etcd, Postgres} }

// Topology is the shape of a Redis group. Other kinds accept only
// [Independent].
type Topology string

// The Redis topologies.
const (
	// Independent servers: N unrelated Redis, MariaDB or PostgreSQL
	// servers, or one
	// ZooKeeper ensemble / etcd cluster of N members.
	Independent Topology = ""
	// Replica is a Redis primary (node 0) with Nodes-1 replicas following it
	// (asynchronous replication). Nodes defaults to 2.
	Replica Topology = "replica"
	// Cluster is a Redis Cluster of Nodes primaries (at least 3, the
	// default) with the 16384 slots spread evenly, and [Spec.Replicas]
	// replicas per primary (none by default).
	Cluster Topology = "cluster"
)

// Provider names, for [Spec.Provider] and DISTLOCK_SANDBOX.
const (
	ProviderAuto   = "auto"
	ProviderDocker = "docker"
	ProviderLocal  = "local"
)

// Credentials and database of every MariaDB/MySQL server.
const (
	// RootPassword is the password of the MariaDB/MySQL user root.
	RootPassword = "sandbox"
	// Database is the database created on every MariaDB/MySQL and
	// PostgreSQL server.
	Database = "distlock"
)

// Credentials of every PostgreSQL server: a superuser authenticated by
// password (scram-sha-256), owner of [Database].
const (
	PostgresUser     = "postgres"
	PostgresPassword = "sandbox"
)

// DefaultStartTimeout bounds each server's start when [Spec.StartTimeout]
// is zero. It is generous: a database initialising on two busy cores can
// take a minute.
const DefaultStartTimeout = 3 * time.Minute

// Spec describes the servers to start. The zero value of every field except
// Kind is a valid default.
type Spec struct {
	// Kind is the server type. Required.
	Kind Kind
	// Nodes is the number of servers: 0 means 1, or 2 for [Replica] and 3
	// for [Cluster]. For a Cluster it counts the primaries only.
	Nodes int
	// Topology shapes a Redis group; see [Topology].
	Topology Topology
	// Replicas is the number of replicas of each primary of a Redis
	// [Cluster]. Nodes 0..Nodes-1 are the primaries; node Nodes+i follows
	// primary i%Nodes. A cluster with replicas fails over by itself: its
	// node timeout is 1 s instead of 2 s.
	Replicas int
	// TLS makes Redis, ZooKeeper or PostgreSQL serve TLS only (rediss://,
	// zks://, postgres://...?sslmode=verify-full): the sandbox creates a
	// throwaway CA, a server certificate for the loopback addresses and a
	// client certificate ([Group.TLSFiles]); client certificates are
	// optional but checked when presented. Redis replication and the
	// cluster bus use TLS too; ZooKeeper serves its secureClientPort
	// (Netty) and its quorum traffic stays plain; PostgreSQL accepts only
	// hostssl connections (ssl_ca_file set, password still required).
	TLS bool
	// Persistent makes Redis write every command to an append-only file
	// (fsync always), so data survives Stop/Start and Kill. MariaDB,
	// ZooKeeper, etcd and PostgreSQL always persist.
	Persistent bool
	// Provider overrides DISTLOCK_SANDBOX: "auto", "docker" or "local".
	Provider string
	// StartTimeout bounds the start of each server and of the group's
	// readiness checks; 0 means [DefaultStartTimeout]. The ctx given to
	// Start bounds everything as well.
	StartTimeout time.Duration
	// Logf, when set, receives progress messages (container creation and
	// the like).
	Logf func(format string, args ...any)
	// MariaDBTLS, when set, makes every MariaDB server accept TLS with the
	// given certificate. MariaDB only.
	MariaDBTLS *ServerTLS
	// Stock gives the servers their distribution's default settings where
	// the sandbox otherwise tunes them for fast fault tests: ZooKeeper's
	// tickTime 2000 ms (sessions of 4 to 40 s), initLimit 10 and syncLimit
	// 5; MariaDB's default InnoDB buffer pool (128 MiB) instead of 64 MiB;
	// Redis's default RDB save schedule. PostgreSQL runs with the
	// postgresql.conf that initdb writes (what Debian's and the official
	// image's clusters start from) either way: the sandbox shortens none
	// of its settings. Benchmarks use it, so that their
	// figures are what a user with a stock server sees. What the sandbox
	// needs to run at all stays: loopback addresses and free ports, Redis
	// without protected mode, ZooKeeper's four-letter words, no admin
	// server.
	Stock bool

	primaries int          // Redis Cluster: primaries; Nodes counts every server
	tls       *tlsMaterial // set by Start when TLS is on
}

// ServerTLS are the PEM files of a server's TLS setup made by the caller,
// on this machine (the docker provider copies them into the container).
// (Redis groups use [Spec.TLS] instead, where the sandbox makes the
// certificates.)
type ServerTLS struct {
	CA   string // CA certificate(s) the server trusts (--ssl-ca)
	Cert string // the server's certificate (--ssl-cert)
	Key  string // its private key (--ssl-key)
	// Require refuses clients that do not use TLS
	// (--require-secure-transport).
	Require bool
}

// args are the server flags for files at ca, cert and key.
func (f *ServerTLS) args(ca, cert, key string) []string {
	args := []string{"--ssl-ca=" + ca, "--ssl-cert=" + cert, "--ssl-key=" + key}
	if f.Require {
		args = append(args, "--require-secure-transport=ON")
	}
	return args
}

// ErrUnavailable reports that the chosen provider cannot run the requested
// servers on this machine: no Docker engine or image, or server binaries
// not installed. The wrapping error names the fix.
var ErrUnavailable = errors.New("sandbox: provider unavailable")

// normalize returns a copy of s with defaults filled in, or an error naming
// the bad field.
func (s Spec) normalize() (Spec, error) {
	switch s.Kind {
	case Redis, MariaDB, ZooKeeper, Etcd, Postgres:
	case "":
		return s, errors.New("sandbox: Spec.Kind is required")
	default:
		return s, fmt.Errorf("sandbox: unknown kind %q (want redis, mariadb, zookeeper, etcd or postgres)", s.Kind)
	}
	if s.Nodes < 0 {
		return s, fmt.Errorf("sandbox: Spec.Nodes %d is negative", s.Nodes)
	}
	switch s.Topology {
	case Independent:
	case Replica, Cluster:
		if s.Kind != Redis {
			return s, fmt.Errorf("sandbox: topology %q is only for redis, not %s", s.Topology, s.Kind)
		}
	default:
		return s, fmt.Errorf("sandbox: unknown topology %q (want \"\", replica or cluster)", s.Topology)
	}
	if s.Nodes == 0 {
		s.Nodes = map[Topology]int{Independent: 1, Replica: 2, Cluster: 3}[s.Topology]
	}
	if s.Topology == Replica && s.Nodes < 2 {
		return s, fmt.Errorf("sandbox: a redis replica group needs at least 2 nodes, got %d", s.Nodes)
	}
	if s.Topology == Cluster && s.Nodes < 3 {
		return s, fmt.Errorf("sandbox: a redis cluster needs at least 3 primaries, got %d", s.Nodes)
	}
	if s.Replicas < 0 {
		return s, fmt.Errorf("sandbox: Spec.Replicas %d is negative", s.Replicas)
	}
	if s.Replicas > 0 && s.Topology != Cluster {
		return s, fmt.Errorf("sandbox: Spec.Replicas is for a redis cluster; a %s group takes replicas as Nodes", topologyName(s.Topology))
	}
	if s.TLS && s.Kind != Redis && s.Kind != ZooKeeper && s.Kind != Postgres {
		return s, fmt.Errorf("sandbox: Spec.TLS is only for redis, zookeeper and postgres, not %s", s.Kind)
	}
	if s.Topology == Cluster {
		s.primaries = s.Nodes
		s.Nodes *= 1 + s.Replicas
	}
	if s.Nodes > 9 {
		return s, fmt.Errorf("sandbox: %d nodes is more than the sandbox supports (9)", s.Nodes)
	}
	if s.MariaDBTLS != nil {
		if s.Kind != MariaDB {
			return s, fmt.Errorf("sandbox: Spec.MariaDBTLS is only for mariadb, not %s", s.Kind)
		}
		for _, f := range []struct{ field, path string }{{"CA", s.MariaDBTLS.CA}, {"Cert", s.MariaDBTLS.Cert}, {"Key", s.MariaDBTLS.Key}} {
			if f.path == "" {
				return s, fmt.Errorf("sandbox: Spec.MariaDBTLS.%s is empty", f.field)
			}
			if _, err := os.Stat(f.path); err != nil {
				return s, fmt.Errorf("sandbox: Spec.MariaDBTLS.%s: %w", f.field, err)
			}
		}
	}
	if s.StartTimeout <= 0 {
		s.StartTimeout = DefaultStartTimeout
	}
	if s.Logf == nil {
		s.Logf = func(string, ...any) {}
	}
	return s, nil
}

// quorum reports whether the nodes form one replicated service that serves
// clients only while a majority runs (a ZooKeeper ensemble or an etcd
// cluster of more than one member).
func (s Spec) quorum() bool {
	return s.Nodes > 1 && (s.Kind == ZooKeeper || s.Kind == Etcd)
}

// clusterNodeTimeout is the Redis Cluster node timeout in milliseconds:
// shorter with replicas, so that a failover takes a second or two.
func (s Spec) clusterNodeTimeout() int {
	if s.Replicas > 0 {
		return redisFailoverNodeTimeout
	}
	return redisNodeTimeout
}

// nodeName is the name of node i: "redis-0", "etcd-2" ...
func (s Spec) nodeName(i int) string { return fmt.Sprintf("%s-%d", s.Kind, i) }
