package redlock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
	"github.com/distlock/distlock/sandbox"
)

// lateFailHook steers one node's calls for the lock key lock. With fail,
// the acquire script fails without being sent. With released set, the
// acquire script waits until a release of the key has been answered by the
// node (released closed), then runs on the node and reports an error to
// the caller, as a connection cut after the write would: the script ran,
// the client does not know it.
type lateFailHook struct {
	lock string
	fail bool

	arrived  func()        // called when the delayed acquire reaches the hook
	released chan struct{} // closed once a release of lock has been answered
	once     sync.Once
	ran      chan struct{} // closed once the delayed acquire has run
	granted  bool          // the delayed acquire took the lock on the node (read after ran)
}

// isScript reports whether args are an EVALSHA of s whose first key is key.
func isScript(args []any, s *redis.Script, key string) bool {
	if len(args) < 4 {
		return false
	}
	name, _ := args[0].(string)
	sha, _ := args[1].(string)
	k, _ := args[3].(string)
	return strings.EqualFold(name, "evalsha") && sha == s.Hash() && k == key
}

func (h *lateFailHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *lateFailHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *lateFailHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd.Args(), redisproto.AcquireScript, h.lock) {
			switch {
			case h.fail:
				err := errors.New("lateFailHook: connection cut before the write")
				cmd.SetErr(err)
				return err
			case h.released != nil:
				h.arrived()
				select {
				case <-h.released:
				case <-time.After(5 * time.Second): // bounded: the test fails on its own
				}
				if next(context.WithoutCancel(ctx), cmd) == nil {
					a, err := redisproto.AcquireReply(cmd.(*redis.Cmd), time.Minute)
					h.granted = err == nil && a.Held
				}
				err := errors.New("lateFailHook: connection cut after the write")
				cmd.SetErr(err)
				close(h.ran)
				return err
			}
		}
		err := next(ctx, cmd)
		if h.released != nil && err == nil && isScript(cmd.Args(), redisproto.ReleaseScript, h.lock) {
			h.once.Do(func() { close(h.released) })
		}
		return err
	}
}

// TestRedlockLateFailedCallReleases: a node whose acquire call the attempt
// stopped waiting for, and which then fails, may still have run the
// script, after the attempt's cleanup released the key there (the cleanup
// does not wait for a call in flight). That hold must be given back too,
// not left until its TTL. Node 1's acquire fails; node 2's waits in a
// hook, which ends the attempt's ctx, until the cleanup's release of the
// key on node 2 has been answered, then runs there (taking the now free
// key) and reports an error. After the driver's Close (which waits for
// every node call and what follows it) no node may hold the key. Before
// the fix only a late grant was released, and node 2 kept the key for the
// TTL's minute.
func TestRedlockLateFailedCallReleases(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Nodes: 3})
	ctx := testCtx(t, time.Minute)
	if err := loadScripts(ctx, g); err != nil { // EVALSHA from the start: what the hooks match
		t.Fatal(err)
	}
	r, clients := nodeDriver(t, g)
	const key = "late-fail"
	ks := redisproto.KeysFor(DefaultPrefix, key)
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	late := &lateFailHook{lock: ks.Lock, arrived: cancel, released: make(chan struct{}), ran: make(chan struct{})}
	clients[1].AddHook(&lateFailHook{lock: ks.Lock, fail: true}) // after New's own checks
	clients[2].AddHook(late)

	if _, err := r.TryAcquire(actx, backend.Request{Key: key, Owner: "o", TTL: time.Minute}); err == nil {
		t.Fatal("an attempt with one node of three granted got the lock")
	}
	select {
	case <-late.ran:
	case <-ctx.Done():
		t.Fatal("node 2's delayed acquire never ran")
	}
	if !late.granted {
		t.Fatal("node 2's delayed acquire did not take the key after the cleanup's release: the case under test was not reached")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for i, c := range clients {
		if n, err := c.Exists(ctx, ks.Lock).Result(); err != nil || n != 0 {
			t.Errorf("node %d still holds the key (expires in %v; %v) after the failed attempt and the driver's Close", i, c.PTTL(ctx, ks.Lock).Val(), err)
		}
	}
}
