package sandbox

import (
	"net/url"
	"strings"
)

// RedisURL returns "redis://addr" for one address, or the addresses joined
// by commas ("redis://h1:p1,h2:p2") for several (a Redis Cluster or the
// independent servers of Redlock).
func RedisURL(addrs ...string) string { return "redis://" + strings.Join(addrs, ",") }

// MySQLURL returns "mysql://root:<RootPassword>@addr/<Database>", the
// distlock URL of a sandbox MariaDB/MySQL server.
func MySQLURL(addr string) string {
	u := url.URL{
		Scheme: "mysql",
		User:   url.UserPassword("root", RootPassword),
		Host:   addr,
		Path:   "/" + Database,
	}
	return u.String()
}

// MySQLDSN returns a github.com/go-sql-driver/mysql DSN for the sandbox
// MariaDB/MySQL server at addr: user root, database [Database], with
// parseTime and a 5 s dial timeout.
func MySQLDSN(addr string) string {
	return "root:" + RootPassword + "@tcp(" + addr + ")/" + Database + "?parseTime=true&timeout=5s"
}

// ZooKeeperURL returns "zk://h1:p1,h2:p2,...".
func ZooKeeperURL(addrs ...string) string { return "zk://" + strings.Join(addrs, ",") }

// EtcdURL returns "etcd://h1:p1,h2:p2,...".
func EtcdURL(addrs ...string) string { return "etcd://" + strings.Join(addrs, ",") }

// PostgresURL returns
// "postgres://<PostgresUser>:<PostgresPassword>@addr/<Database>?sslmode=disable",
// the URL of a sandbox PostgreSQL server without TLS (github.com/jackc/pgx
// and libpq read it).
func PostgresURL(addr string) string {
	return postgresURL(addr, url.Values{"sslmode": {"disable"}})
}

// PostgresTLSURL returns the URL of a sandbox PostgreSQL server serving
// TLS ([Spec.TLS]): sslmode=verify-full against the CA file ca, so the
// server's certificate and host are checked.
func PostgresTLSURL(addr, ca string) string {
	return postgresURL(addr, url.Values{"sslmode": {"verify-full"}, "sslrootcert": {ca}})
}

func postgresURL(addr string, q url.Values) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(PostgresUser, PostgresPassword),
		Host:     addr,
		Path:     "/" + Database,
		RawQuery: q.Encode(),
	}
	return u.String()
}
