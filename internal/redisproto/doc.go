// Package redisproto is the Redis protocol that the drivers redislock (a
// single server or a Cluster) and redlock (a quorum of independent
// primaries) share: the lock's key layout (Keyset), the acquire, wait
// (fair queue), release, refresh and fence scripts and the reading of
// their replies, the shared pub/sub connection (Notifier), what a go-redis
// client's options say of its calls' bounds (ClientBounds), and the
// redis:// URL: its parsing (Config) and the registry through which each
// driver package serves its modes (Register). It is internal to the
// library: a driver's users see only redislock and redlock.
package redisproto
