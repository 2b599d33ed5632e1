// Package sandbox starts throwaway real servers (Redis, MariaDB/MySQL,
// ZooKeeper, etcd) for tests, benchmarks and demos: single nodes and small
// clusters on free loopback ports, stopped and removed when their owner
// closes them.
//
// # Providers
//
// Two providers sit behind one API; the environment variable
// DISTLOCK_SANDBOX (or [Spec.Provider]) picks one:
//
//   - "docker": containers through testcontainers-go, which runs in the
//     container broker, the program of the module
//     github.com/distlock/distlock/sandbox/containers: the sandbox builds it
//     from the repository's sandbox/containers into the user cache directory
//     (or runs the one named by DISTLOCK_SANDBOX_BROKER, [EnvBroker]) and
//     drives it by JSON lines on its stdin/stdout. This package imports the
//     standard library only, so the drivers' tests that import it carry no
//     container stack, and no other store's client, into a user's go.sum.
//     Images default to the
//     official ones (redis:7, mariadb:11, zookeeper:3.9,
//     gcr.io/etcd-development/etcd:v3.5.17) and are overridden per server by
//     DISTLOCK_IMAGE_REDIS, DISTLOCK_IMAGE_MARIADB, DISTLOCK_IMAGE_ZOOKEEPER
//     and DISTLOCK_IMAGE_ETCD. Images are never pulled implicitly: when the
//     official image is not present locally, the substitute image built by
//     scripts/build-images.sh (distlock-local/<kind>:latest) is used; when
//     neither exists, Start fails with [ErrUnavailable] naming the fix.
//     An image named in DISTLOCK_IMAGE_* is used as given (and pulled by
//     testcontainers if absent).
//   - "local": processes of the OS-packaged servers (redis-server, mariadbd,
//     etcd, java with /usr/share/java/zookeeper.jar), installed by
//     scripts/install-servers.sh, each in its own process group and temporary
//     directory. DISTLOCK_ETCD_BIN ([EnvEtcdBin]) names an etcd binary to
//     run instead of the etcd in PATH.
//   - "auto" (the default): docker when an engine answers and an image for
//     the kind exists locally, else local.
//
// The broker removes every container and network it made when its stdin
// closes: when the process that started it exits or dies, even of SIGKILL.
// It sets TESTCONTAINERS_RYUK_DISABLED=true when that is unset (the reaper
// image cannot be pulled everywhere); containers and networks carry the
// labels org.testcontainers=true and distlock.sandbox=1, and
// scripts/cleanup-containers.sh removes what a killed broker leaves. Local server processes get
// SIGKILL when the process that started them dies (Linux).
//
// # Topologies
//
// [Spec.Nodes] servers of [Spec.Kind] are started. For ZooKeeper they form
// one ensemble and for etcd one cluster; for Redis and MariaDB they are
// independent servers (several Redis primaries for Redlock), unless
// [Spec.Topology] asks for a Redis primary with replicas ([Replica]) or a
// Redis Cluster of primaries ([Cluster]), optionally with [Spec.Replicas]
// replicas per primary that take over when their primary dies. With
// [Spec.TLS] Redis serves TLS only, with throwaway certificates
// ([Group.TLSFiles], [Group.ClientTLS]).
//
// # Faults
//
// Every [Node] can be killed (SIGKILL, no clean shutdown), stopped cleanly and
// started again with its data kept (Redis keeps data only with
// [Spec.Persistent]), and paused and resumed (SIGSTOP/SIGCONT to the process
// group, or the cgroup freezer for containers). A container's host port may
// change when it is started again: [Node.Addr] always returns the current
// address, so read it again after [Node.Start].
//
// # URLs
//
// [Group.URL] and the helpers [RedisURL], [MySQLURL], [ZooKeeperURL] and
// [EtcdURL] build the distlock backend URLs (redis://, mysql://, zk://,
// etcd://); [MySQLDSN] builds a go-sql-driver/mysql DSN. MariaDB servers have
// the database [Database] and the user root with password [RootPassword].
package sandbox
