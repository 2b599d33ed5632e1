package peers

import (
	"context"
	"fmt"
	"net"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/distlock/distlock/backend"
)

// etcdPrefix is where the peers keep their keys.
const etcdPrefix = "distlock-bench-peers/"

func etcdStore(u *backend.URL) (*Store, error) {
	pw, _ := u.Password()
	endpoints := u.HostsWithDefaultPort(2379)
	newClient := func(cut *cutter) (*clientv3.Client, error) {
		dial := func(ctx context.Context, addr string) (net.Conn, error) { return cut.dial(ctx, "tcp", addr) }
		return clientv3.New(clientv3.Config{
			Endpoints: endpoints, Username: u.Username(), Password: pw,
			DialTimeout: 10 * time.Second, Logger: zap.NewNop(),
			DialOptions: []grpc.DialOption{grpc.WithContextDialer(dial)},
		})
	}
	return &Store{
		Peers: []Peer{
			peer("concurrency.Mutex", "etcd client/v3 concurrency.Mutex, one session (lease TTL = the run's TTL, at least 1 s) per client",
				func(ctx context.Context, ttl time.Duration, cut *cutter) (client, error) {
					cli, err := newClient(cut)
					if err != nil {
						return nil, err
					}
					s, err := concurrency.NewSession(cli, concurrency.WithTTL(max(1, int(ttl.Round(time.Second)/time.Second))),
						concurrency.WithContext(context.WithoutCancel(ctx)))
					if err != nil {
						cli.Close()
						return nil, err
					}
					return &mutexClient{cli: cli, s: s}, nil
				}),
		},
		Floor: floor("Get", func() (func(context.Context) error, func(), error) {
			cli, err := newClient(nil)
			if err != nil {
				return nil, nil, err
			}
			return func(ctx context.Context) error {
				_, err := cli.Get(ctx, etcdPrefix+"floor")
				return err
			}, func() { _ = cli.Close() }, nil
		}),
		Info: func(ctx context.Context) (Info, error) {
			cli, err := newClient(nil)
			if err != nil {
				return Info{}, err
			}
			defer cli.Close()
			return etcdInfo(ctx, cli, endpoints[0])
		},
	}, nil
}

func etcdInfo(ctx context.Context, cli *clientv3.Client, endpoint string) (Info, error) {
	st, err := cli.Status(ctx, endpoint)
	if err != nil {
		return Info{}, err
	}
	info := Info{Version: "etcd " + st.Version}
	if ms, err := cli.MemberList(ctx); err == nil {
		info.Settings = append(info.Settings, fmt.Sprintf("members %d", len(ms.Members)))
	}
	return info, nil
}

// mutexClient is etcd's concurrency.Mutex on one session.
type mutexClient struct {
	cli *clientv3.Client
	s   *concurrency.Session
}

func (c *mutexClient) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	m := concurrency.NewMutex(c.s, etcdPrefix+"mutex/"+key)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return m.Unlock, nil
}

func (c *mutexClient) Close() {
	_ = c.s.Close()
	_ = c.cli.Close()
}

// abandon stops the session's keep-alives without revoking its lease,
// which then expires as a killed process's would.
func (c *mutexClient) abandon(func(context.Context) error) {
	c.s.Orphan()
	_ = c.cli.Close()
}
