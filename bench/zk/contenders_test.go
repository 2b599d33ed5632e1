package zkbench

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/bench/internal/lockbench"
	"github.com/distlock/distlock/bench/internal/measure"
	"github.com/distlock/distlock/zklock"
)

// sessionTimeout is the session timeout of both libraries: long enough that
// nothing expires during a measurement.
const sessionTimeout = 10 * time.Second

var libraries = []measure.Library{
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

// newDistlock is a distlock Locker over a zklock Driver.
func newDistlock() (measure.Contender, error) {
	conn, err := newConn()
	if err != nil {
		return nil, err
	}
	d, err := zklock.New(conn, &zklock.Options{Base: "/bench/distlock", SessionTimeout: sessionTimeout})
	if err != nil {
		conn.Close()
		return nil, err
	}
	l := distlock.New(d, distlock.WithDefaultTTL(sessionTimeout))
	return &lockbench.LockerContender{L: l, CloseClient: conn.Close}, nil
}

// zkLockContender is go-zookeeper's zk.Lock on one session.
type zkLockContender struct{ conn *zk.Conn }

func newZKLock() (measure.Contender, error) {
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
