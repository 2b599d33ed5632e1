package peers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/etcdlock"
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
				}).from("go.etcd.io/etcd/client/v3", "0 (the client's session: one connection per client)"),
		},
		Conns: "0 (the Locker's connection)",
		Distlock: distlockPeer("etcdlock.New over clientv3.New (its defaults), one Locker per client; lease TTL = the run's TTL (at least etcdlock.MinTTL)",
			func(_ context.Context, ttl time.Duration) (backend.Driver, func(), error) {
				cli, err := newClient(nil)
				if err != nil {
					return nil, nil, err
				}
				d, err := etcdlock.New(cli, &etcdlock.Options{TTL: max(ttl, etcdlock.MinTTL)})
				if err != nil {
					_ = cli.Close()
					return nil, nil, err
				}
				return d, func() { _ = cli.Close() }, nil
			}),
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
		Counters: func(ctx context.Context) (float64, float64, error) { return etcdCounters(ctx, endpoints[0]) },
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

// etcdCounters reads the server's Prometheus metrics: gRPC messages
// received (unary requests and stream messages), and WAL fsyncs.
func etcdCounters(ctx context.Context, endpoint string) (requests, fsyncs float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+endpoint+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var dst *float64
		switch {
		case strings.HasPrefix(line, "grpc_server_msg_received_total{"):
			dst = &requests
		case strings.HasPrefix(line, "etcd_disk_wal_fsync_duration_seconds_count "):
			dst = &fsyncs
		default:
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, 0, fmt.Errorf("GET /metrics: %q: %w", line, err)
		}
		*dst += v
		found++
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if found == 0 {
		return 0, 0, errors.New("GET /metrics: no grpc_server_msg_received_total")
	}
	return requests, fsyncs, nil
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
