package redislock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sandbox"
)

// requirePassword makes the server of node n demand a password (the
// requirepass of a server whose default user has one), as a test helper:
// the sandbox starts servers without one. The password is cleared again
// when t ends.
func requirePassword(ctx context.Context, t *testing.T, n sandbox.Node, password string) {
	t.Helper()
	admin := nodeClient(n)
	if err := admin.ConfigSet(ctx, "requirepass", password).Err(); err != nil {
		t.Fatalf("CONFIG SET requirepass: %v", err)
	}
	_ = admin.Close()
	t.Cleanup(func() {
		c := redis.NewClient(&redis.Options{Addr: n.Addr(), Password: password, MaxRetries: -1})
		defer c.Close()
		_ = c.ConfigSet(context.Background(), "requirepass", "").Err()
	})
}

// checkAuthErr fails t unless err is one line matching ErrInvalidConfig
// (not ErrUnavailable), contains want and shows no password.
func checkAuthErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", want)
	}
	t.Logf("error: %v", err)
	if !errors.Is(err, distlock.ErrInvalidConfig) || errors.Is(err, distlock.ErrUnavailable) {
		t.Errorf("%v: want ErrInvalidConfig and not ErrUnavailable (no retry fixes a refused login)", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
	if strings.Contains(err.Error(), aclPassword) {
		t.Errorf("the error shows the password: %v", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("the error spans several lines: %q", err)
	}
}

// A server that wants a password and gets none (NOAUTH) or a wrong one
// (WRONGPASS): Open says so, with ErrInvalidConfig (the CLI exits 64),
// in every mode.
func TestOpenRefusedLogin(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	ctx := testCtx(t, time.Minute)
	requirePassword(ctx, t, g.Node(0), aclPassword)
	for _, mode := range []string{"", "?wait=queue", "?wait=notify", "?mode=redlock"} {
		t.Run("no password"+mode, func(t *testing.T) {
			l, err := distlock.Open(ctx, g.URL()+mode)
			if err == nil {
				l.Close()
			}
			checkAuthErr(t, err, "NOAUTH")
		})
		t.Run("wrong password"+mode, func(t *testing.T) {
			l, err := distlock.Open(ctx, withUser(t, g.URL(), "default", "wrong-"+aclPassword)+mode)
			if err == nil {
				l.Close()
			}
			checkAuthErr(t, err, "WRONGPASS")
		})
	}
}

// A Locker built over a client without the server's password (New, which
// does not dial): Acquire and Campaign end at once with the refusal, in
// every wait mode, instead of waiting out their ctx as "store unavailable".
func TestAcquireRefusedLoginEndsAtOnce(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	ctx := testCtx(t, time.Minute)
	requirePassword(ctx, t, g.Node(0), aclPassword)
	for name, wait := range map[string]WaitMode{"queue": WaitQueue, "notify": WaitNotify} {
		for _, redlock := range []bool{false, true} {
			if redlock {
				name += "-redlock"
			}
			t.Run(name, func(t *testing.T) {
				c := redis.NewClient(&redis.Options{Addr: g.Node(0).Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
				defer c.Close()
				var l *distlock.Locker
				if redlock {
					d, err := newRedlock([]redis.UniversalClient{c}, &redlockOptions{Wait: wait})
					if err != nil {
						t.Fatal(err)
					}
					l = distlock.New(d)
				} else {
					d, err := New(c, &Options{Wait: wait})
					if err != nil {
						t.Fatal(err)
					}
					l = distlock.New(d)
				}
				defer l.Close()
				actx, cancel := context.WithTimeout(ctx, 3*time.Second)
				defer cancel()
				start := time.Now()
				_, err := l.Acquire(actx, "auth-acquire")
				checkAuthErr(t, err, "NOAUTH")
				if took := time.Since(start); actx.Err() != nil {
					t.Errorf("Acquire took %v, until its ctx ended: it waited on a refused login", took)
				}
				e, err := l.Election("auth-campaign")
				if err != nil {
					t.Fatal(err)
				}
				cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
				defer ccancel()
				_, err = e.Campaign(cctx, "v")
				checkAuthErr(t, err, "NOAUTH")
				if cctx.Err() != nil {
					t.Errorf("Campaign waited until its ctx ended on a refused login")
				}
			})
		}
	}
}

// A semaphore refused the login says so in one line, without a word about
// a cleanup the refused script never needed (issue 32, item 8).
func TestSemaphoreRefusedLoginReadsOnce(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	ctx := testCtx(t, time.Minute)
	requirePassword(ctx, t, g.Node(0), aclPassword)
	l := lockerOver(t, redis.NewClient(&redis.Options{Addr: g.Node(0).Addr(), MaxRetries: -1, ContextTimeoutEnabled: true}))
	s, err := l.Semaphore("auth-sem", 2)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.TryAcquire(ctx)
	checkAuthErr(t, err, "NOAUTH")
	if strings.Contains(err.Error(), "cleanup") {
		t.Errorf("the error speaks of a cleanup: %v", err)
	}
	actx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err = s.Acquire(actx)
	checkAuthErr(t, err, "NOAUTH")
	if actx.Err() != nil {
		t.Errorf("the semaphore's Acquire waited out its ctx on a refused login")
	}
}
