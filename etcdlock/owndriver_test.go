package etcdlock

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// ownDrivers returns n drivers (TTL 10 s, keys under prefix), each on a
// client of its own of the etcd at endpoints, dialled with dial; both are
// closed when t ends.
func ownDrivers(t *testing.T, endpoints []string, n int, prefix string, dial ...grpc.DialOption) []*Driver {
	t.Helper()
	ds := make([]*Driver, 0, n)
	for range n {
		cli, err := clientv3.New(clientv3.Config{
			Endpoints: endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop(), DialOptions: dial,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		d, err := New(cli, &Options{Prefix: prefix, TTL: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		ds = append(ds, d)
	}
	return ds
}
