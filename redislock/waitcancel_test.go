package redislock

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
)

// stallHook holds every script call once armed, as a server that stopped
// answering would, and says when the first one is out.
type stallHook struct {
	mu      sync.Mutex
	armed   bool
	out     chan struct{} // closed when the first held command arrives
	release chan struct{} // closed to let held commands go on
}

func (h *stallHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *stallHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *stallHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		armed := h.armed && (cmd.Name() == "evalsha" || cmd.Name() == "eval")
		if armed {
			select {
			case <-h.out:
			default:
				close(h.out)
			}
		}
		h.mu.Unlock()
		if armed {
			<-h.release // go-redis without ContextTimeoutEnabled does not end a call by its ctx either
		}
		return next(ctx, cmd)
	}
}

// TestWaitCanceledWithCallOut: a queue-mode wait whose ctx is canceled
// while its attempt is out (the server not answering) fails with the
// cancellation, not with ErrUnavailable: the caller gave up, the store was
// not found unreachable. The conformance case WaitCancel saw this on the
// container pass ("redislock: wait ...: store unavailable: context
// canceled ... a canceled ctx is not an unreachable store").
func TestWaitCanceledWithCallOut(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	admin := nodeClient(g.Node(0))
	defer admin.Close()
	holder, err := New(admin, &Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	lh := distlock.New(holder, distlock.WithDefaultTTL(5*time.Second))
	defer lh.Close()
	le, err := lh.Acquire(t.Context(), "wc")
	if err != nil {
		t.Fatal(err)
	}
	defer le.Release(context.Background())

	hook := &stallHook{out: make(chan struct{}), release: make(chan struct{})}
	user := redis.NewClient(&redis.Options{Addr: g.Node(0).Addr()}) // go-redis's defaults
	defer user.Close()
	user.AddHook(hook)
	d, err := New(user, &Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	defer close(hook.release) // before Close, which waits for the held call
	hook.mu.Lock()
	hook.armed = true
	hook.mu.Unlock()

	// A ctx with a deadline, as the conformance case's, canceled early.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	done := make(chan error, 1)
	go func() {
		_, err := d.Wait(ctx, backend.Request{Key: "wc", Owner: "waiter", TTL: 5 * time.Second})
		done <- err
	}()
	select {
	case <-hook.out:
	case err := <-done:
		t.Fatalf("Wait returned %v before its attempt was out", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the wait's attempt never reached the client")
	}
	cancel()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return within 10 s of its ctx's cancellation")
	}
	if !errors.Is(err, context.Canceled) || errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("Wait canceled with its attempt out = %v, want context.Canceled and not ErrUnavailable", err)
	}
}
