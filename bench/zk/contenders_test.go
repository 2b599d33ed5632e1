package zkbench

import (
	"context"
	"errors"
	"time"

	"github.com/distlock/distlock/bench/internal/lockbench"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/zklock"
)

// sessionTimeout is the session timeout of both libraries: long enough that
// nothing expires during a measurement.
const sessionTimeout = 10 * time.Second

var libraries = []lockbench.Library{
	{Name: "distlock", Make: newDistlock},
	{Name: "zk.Lock", Make: newZKLock},
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// newConn opens a session and waits until the server granted it.
func newConn() (*zk.Conn, error) {
	conn, events, err := zk.Connect([]string{addr}, sessionTimeout, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn, nil
			}
		case <-timeout:
			conn.Close()
			return nil, errors.New("no ZooKeeper session after 30s")
		}
	}
}

// distlockContender is a distlock Locker over a zklock Driver.
type distlockContender struct {
	conn *zk.Conn
	l    *distlock.Locker
}

func newDistlock() (lockbench.Contender, error) {
	conn, err := newConn()
	if err != nil {
		return nil, err
	}
	d, err := zklock.New(conn, &zklock.Options{Base: "/bench/distlock", SessionTimeout: sessionTimeout})
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &distlockContender{conn: conn, l: distlock.New(d, distlock.WithDefaultTTL(sessionTimeout))}, nil
}

func (c *distlockContender) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	le, err := c.l.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return le.Release, nil
}

func (c *distlockContender) Close() {
	_ = c.l.Close()
	c.conn.Close()
}

// zkLockContender is go-zookeeper's zk.Lock on one session.
type zkLockContender struct{ conn *zk.Conn }

func newZKLock() (lockbench.Contender, error) {
	conn, err := newConn()
	if err != nil {
		return nil, err
	}
	return &zkLockContender{conn: conn}, nil
}

func (c *zkLockContender) Acquire(_ context.Context, key string) (func(context.Context) error, error) {
	l := zk.NewLock(c.conn, "/bench/zklock/"+key, zk.WorldACL(zk.PermAll))
	if err := l.Lock(); err != nil {
		return nil, err
	}
	return func(context.Context) error { return l.Unlock() }, nil
}

func (c *zkLockContender) Close() { c.conn.Close() }
