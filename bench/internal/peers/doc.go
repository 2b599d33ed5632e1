// Package peers drives other lock libraries, and each store's bare round
// trip, as contenders of the measurement core (internal/measure), so that
// distlock-bench measures them in the same run, with the same
// workloads, beside distlock:
//
//   - Redis: github.com/go-redsync/redsync/v4 and github.com/bsm/redislock;
//   - MySQL/MariaDB: GET_LOCK on a pinned connection, and a bare
//     BEGIN; SELECT ... FOR UPDATE; COMMIT on a table of its own;
//   - etcd: go.etcd.io/etcd/client/v3/concurrency.Mutex;
//   - ZooKeeper: github.com/go-zookeeper/zk's Lock.
//
// The floor of a store is one bare round trip (Redis PING, SELECT 1, etcd
// Get, ZooKeeper Exists) taken as an "acquire" with nothing to release.
// A fenced floor (fenced.go; Redis: SET NX PX + INCR in one script, an
// owner-checked DEL; MySQL/MariaDB and PostgreSQL: the FOR UPDATE and the
// GET_LOCK / pg_advisory_lock peers with a per-key counter committed in
// autocommit while the lock is held) is the least lock of the store's
// kind with a fencing token, written here: a peer marked Peer.Fenced.
//
// A peer's crash cuts its client's connections and refuses every redial,
// then frees the client without a word to the store: the store sees what
// it sees when a process is killed, and frees the lock as it would then.
//
// Each peer is set up as its README shows, with the lease TTL of the run;
// [Peer.About] says how it waits.
package peers
