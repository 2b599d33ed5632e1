package peers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/zklock"
)

// zkBase is where the peers keep their nodes.
const zkBase = "/distlock-bench-peers"

type quiet struct{}

func (quiet) Printf(string, ...any) {}

func zkStore(u *backend.URL) (*Store, error) {
	hosts := u.HostsWithDefaultPort(2181)
	connect := func(ctx context.Context, timeout time.Duration, cut *cutter) (*zk.Conn, error) {
		dial := func(network, addr string, t time.Duration) (net.Conn, error) {
			dctx, cancel := context.WithTimeout(context.Background(), t)
			defer cancel()
			return cut.dial(dctx, network, addr)
		}
		return zkConnect(ctx, hosts, timeout, dial)
	}
	return &Store{
		Peers: []Peer{
			peer("zk.Lock", "go-zookeeper zk.Lock (sequential ephemeral node, watch the one before), one session (timeout = the run's TTL) per client; a wait given up closes the session",
				func(ctx context.Context, ttl time.Duration, cut *cutter) (client, error) {
					conn, err := connect(ctx, ttl, cut)
					if err != nil {
						return nil, err
					}
					return &zkLockClient{conn: conn}, nil
				}).from("github.com/go-zookeeper/zk", "0 (the client's session: one connection per client)"),
		},
		Conns: "0 (the Locker's session)",
		Distlock: distlockPeer("zklock.New over zk.Connect (session timeout = the run's TTL), one Locker per session",
			func(ctx context.Context, ttl time.Duration) (backend.Driver, func(), error) {
				conn, err := connect(ctx, ttl, nil)
				if err != nil {
					return nil, nil, err
				}
				d, err := zklock.New(conn, &zklock.Options{SessionTimeout: ttl})
				if err != nil {
					conn.Close()
					return nil, nil, err
				}
				return d, conn.Close, nil
			}),
		Floor: floor("Exists", func() (func(context.Context) error, func(), error) {
			conn, err := connect(context.Background(), 10*time.Second, nil)
			if err != nil {
				return nil, nil, err
			}
			return func(context.Context) error {
				_, _, err := conn.Exists("/")
				return err
			}, conn.Close, nil
		}),
		Info:     func(ctx context.Context) (Info, error) { return zkInfo(ctx, hosts[0]) },
		Counters: func(ctx context.Context) (float64, float64, error) { return zkCounters(ctx, hosts[0]) },
	}, nil
}

// zkConnect opens a session and waits until the server granted it.
func zkConnect(ctx context.Context, hosts []string, timeout time.Duration, dial zk.Dialer) (*zk.Conn, error) {
	conn, events, err := zk.Connect(hosts, timeout, zk.WithLogger(quiet{}), zk.WithLogInfo(false), zk.WithDialer(dial))
	if err != nil {
		return nil, err
	}
	limit := time.After(30 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn, nil
			}
		case <-limit:
			conn.Close()
			return nil, errors.New("no ZooKeeper session after 30s")
		case <-ctx.Done():
			conn.Close()
			return nil, ctx.Err()
		}
	}
}

// zkCounters asks the server with the mntr four-letter word: packets
// received, and the count of its transaction log fsyncs.
func zkCounters(ctx context.Context, addr string) (requests, fsyncs float64, err error) {
	lines, err := fourLetters(ctx, addr, "mntr")
	if err != nil {
		return 0, 0, err
	}
	found := 0
	for _, line := range lines {
		name, value, _ := strings.Cut(line, "\t")
		var dst *float64
		switch name {
		case "zk_packets_received":
			dst = &requests
		case "zk_cnt_fsynctime":
			dst = &fsyncs
		default:
			continue
		}
		if *dst, err = strconv.ParseFloat(value, 64); err != nil {
			return 0, 0, fmt.Errorf("mntr: %s: %w", name, err)
		}
		found++
	}
	if found != 2 {
		return 0, 0, errors.New("the server did not answer mntr with zk_packets_received and zk_cnt_fsynctime (not in 4lw.commands.whitelist?)")
	}
	return requests, fsyncs, nil
}

// fourLetters sends a four-letter word and returns the reply's lines.
func fourLetters(ctx context.Context, addr, word string) ([]string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte(word)); err != nil {
		return nil, err
	}
	var lines []string
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines, sc.Err()
}

// zkInfo asks the server with the srvr four-letter word.
func zkInfo(ctx context.Context, addr string) (Info, error) {
	lines, err := fourLetters(ctx, addr, "srvr")
	if err != nil {
		return Info{}, err
	}
	var info Info
	for _, line := range lines {
		if v, ok := strings.CutPrefix(line, "Zookeeper version: "); ok {
			v, _, _ = strings.Cut(v, ",")
			v, _, _ = strings.Cut(v, "-$") // an unexpanded build placeholder
			info.Version = "ZooKeeper " + v
		}
		if v, ok := strings.CutPrefix(line, "Mode: "); ok {
			info.Settings = append(info.Settings, "mode "+v)
		}
	}
	if info.Version == "" {
		return info, errors.New("the server did not answer srvr (not in 4lw.commands.whitelist?)")
	}
	return info, nil
}

// zkLockClient is go-zookeeper's zk.Lock on one session.
type zkLockClient struct {
	conn      *zk.Conn
	closeOnce sync.Once
}

// Acquire waits in zk.Lock, which takes no context: when ctx ends first,
// the session is closed (deleting the queued node) and the client is
// spent.
func (c *zkLockClient) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	l := zk.NewLock(c.conn, zkBase+"/zk.Lock/"+key, zk.WorldACL(zk.PermAll))
	done := make(chan error, 1)
	go func() { done <- l.Lock() }()
	select {
	case err := <-done:
		if err != nil {
			return nil, err
		}
		return func(context.Context) error { return l.Unlock() }, nil
	case <-ctx.Done():
		c.Close()
		<-done
		return nil, ctx.Err()
	}
}

func (c *zkLockClient) Close() { c.closeOnce.Do(c.conn.Close) }

// abandon closes the client, whose connection is cut: the close request
// never reaches the server, which expires the session after its timeout.
func (c *zkLockClient) abandon(func(context.Context) error) { c.Close() }
