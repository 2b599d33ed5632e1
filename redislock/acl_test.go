package redislock

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
	"github.com/distlock/distlock/sandbox"
)

// aclLockUser is the minimal ACL of a distlock user with the default
// prefix, as docs/redis.md documents it: the keys and channels under the
// prefix, the script commands, pub/sub for waiters, and every command the
// scripts call (Redis checks those against the caller's ACL too). Fair
// mode and Redlock need nothing more; Inspect adds +hgetall +zcard,
// wait_replicas +wait, a Redis Cluster client +cluster|slots.
var aclLockUser = []string{
	"~distlock:*", "&distlock:*",
	"+evalsha", "+eval", "+subscribe", "+unsubscribe", "+ping",
	// called by the scripts
	"+hget", "+hset", "+hsetnx", "+hexists", "+hdel", "+hincrby", "+get", "+set", "+incr", "+del", "+exists",
	"+pexpire", "+pttl", "+publish", "+time", "+zadd", "+zrange", "+zrem", "+zscore",
	// Inspect
	"+hgetall", "+zcard",
}

// aclPassword is a password that no error message may show.
const aclPassword = "pw-Zq8-never-printed"

// setACLUser creates (or resets) user on the server behind admin with the
// password aclPassword and the given rules.
func setACLUser(ctx context.Context, t *testing.T, admin *redis.Client, user string, rules ...string) {
	t.Helper()
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">" + aclPassword}
	for _, r := range rules {
		args = append(args, r)
	}
	if err := admin.Do(ctx, args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %s: %v", user, err)
	}
}

// withUser returns rawURL with user and password set.
func withUser(t *testing.T, rawURL, user, password string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

// without returns rules minus the ones listed.
func without(rules []string, drop ...string) []string {
	var out []string
	for _, r := range rules {
		keep := true
		for _, d := range drop {
			keep = keep && r != d
		}
		if keep {
			out = append(out, r)
		}
	}
	return out
}

// lockSmoke exercises every script of the driver behind rawURL with two
// Lockers (two "processes"): a grant, a refused TryAcquire, a waiter woken
// by the release over pub/sub, renewals by the watchdog, a cross-process
// re-entry, a waiter giving up, Inspect and releases. It fails the test on
// the first error.
func lockSmoke(ctx context.Context, t *testing.T, rawURL string) {
	t.Helper()
	l1, err := distlock.Open(ctx, rawURL)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l1.Close()
	l2, err := distlock.Open(ctx, rawURL)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l2.Close()
	key := "smoke-" + strings.ReplaceAll(t.Name(), "/", "-")

	// A short TTL: the watchdog renews within the test.
	le1, err := l1.TryAcquire(ctx, key, distlock.WithTTL(600*time.Millisecond))
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if _, err := l2.TryAcquire(ctx, key); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("second TryAcquire: %v, want ErrNotAcquired", err)
	}
	// Same owner from the other process: a cross-process re-entry.
	re, err := l2.TryAcquire(ctx, key, distlock.WithOwner(le1.Owner()), distlock.WithoutAutoRenew())
	if err != nil {
		t.Fatalf("cross-process re-entry: %v", err)
	}
	if err := re.Release(ctx); err != nil {
		t.Fatalf("release of the re-entry: %v", err)
	}
	// A waiter that gives up (in fair mode it leaves the queue).
	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	_, err = l2.Acquire(short, key)
	cancel()
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire bounded by 150ms while held: %v, want a deadline error", err)
	}
	got := make(chan *distlock.Lease, 1)
	waitErr := make(chan error, 1)
	go func() {
		le, err := l2.Acquire(ctx, key)
		if err != nil {
			waitErr <- err
			return
		}
		got <- le
	}()
	time.Sleep(800 * time.Millisecond) // past the first TTL: renewals kept it
	if err := le1.Err(); err != nil {
		t.Fatalf("the holder lost its lease while the watchdog renewed it: %v", err)
	}
	if l1.Capabilities().Inspect {
		info, err := l1.Driver().(backend.Inspector).Inspect(ctx, key, backend.Exclusive)
		if err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		if !info.Held || info.Owner != le1.Owner() {
			t.Fatalf("Inspect = %+v, want held by %s", info, le1.Owner())
		}
	}
	released := time.Now()
	if err := le1.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	select {
	case le2 := <-got:
		t.Logf("the waiter got the lock %v after the release (token %d after %d)", time.Since(released), le2.Token(), le1.Token())
		if le2.Token() <= le1.Token() {
			t.Errorf("token %d after %d", le2.Token(), le1.Token())
		}
		if err := le2.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
	case err := <-waitErr:
		t.Fatalf("waiter: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not get the lock within 5s of the release")
	}
}

// aclServer starts a Redis server and returns it, a context bounded by a
// minute, and an admin client of it (closed when t ends) that has made
// the user "locker" with the documented minimal ACL.
func aclServer(t *testing.T) (*sandbox.Group, context.Context, *redis.Client) {
	t.Helper()
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	ctx := testCtx(t, time.Minute)
	admin := nodeClient(g.Node(0))
	t.Cleanup(func() { _ = admin.Close() })
	setACLUser(ctx, t, admin, "locker", aclLockUser...)
	return g, ctx, admin
}

// TestACLUser runs the lock smoke test as a Redis user restricted to the
// documented minimal ACL, in the single, fair and Redlock modes.
func TestACLUser(t *testing.T) {
	g, ctx, _ := aclServer(t)
	base := withUser(t, g.URL(), "locker", aclPassword)
	for name, params := range map[string]string{"single": "", "fair": "?wait=queue", "redlock": "?mode=redlock"} {
		t.Run(name, func(t *testing.T) { lockSmoke(ctx, t, base+params) })
	}
}

// TestACLErrors checks what a client is told when its credentials or its
// ACL are wrong: a clear error that never shows the password.
func TestACLErrors(t *testing.T) {
	g, ctx, admin := aclServer(t)

	// try opens rawURL and tries to take a lock; it returns the error of
	// the first step that failed.
	try := func(t *testing.T, rawURL string) error {
		t.Helper()
		l, err := distlock.Open(ctx, rawURL)
		if err != nil {
			return err
		}
		defer l.Close()
		le, err := l.TryAcquire(ctx, "acl-"+strings.ReplaceAll(t.Name(), "/", "-"))
		if err != nil {
			return err
		}
		return le.Release(ctx)
	}
	check := func(t *testing.T, err error, want string) {
		t.Helper()
		if err == nil {
			t.Fatalf("no error, want one containing %q", want)
		}
		t.Logf("error: %v", err)
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
		if strings.Contains(err.Error(), aclPassword) || strings.Contains(err.Error(), "wrong-"+aclPassword) {
			t.Errorf("the error shows the password: %v", err)
		}
	}

	t.Run("wrong password", func(t *testing.T) {
		err := try(t, withUser(t, g.URL(), "locker", "wrong-"+aclPassword))
		check(t, err, "WRONGPASS")
	})
	t.Run("unknown user", func(t *testing.T) {
		err := try(t, withUser(t, g.URL(), "nobody", aclPassword))
		check(t, err, "WRONGPASS")
	})
	t.Run("disabled user", func(t *testing.T) {
		setACLUser(ctx, t, admin, "off-user", aclLockUser...)
		if err := admin.Do(ctx, "ACL", "SETUSER", "off-user", "off").Err(); err != nil {
			t.Fatal(err)
		}
		check(t, try(t, withUser(t, g.URL(), "off-user", aclPassword)), "WRONGPASS")
	})
	t.Run("keys outside the user's pattern", func(t *testing.T) {
		// The user's keys are under "distlock:", the URL asks for "other".
		err := try(t, withUser(t, g.URL(), "locker", aclPassword)+"?prefix=other")
		check(t, err, "NOPERM")
	})
	t.Run("no evalsha", func(t *testing.T) {
		setACLUser(ctx, t, admin, "no-eval", without(aclLockUser, "+evalsha", "+eval")...)
		check(t, try(t, withUser(t, g.URL(), "no-eval", aclPassword)), "NOPERM")
	})
	t.Run("a command inside the script", func(t *testing.T) {
		// INCR mints the token inside the acquire script. Redis 7.0 does
		// not name the command, only the script line.
		setACLUser(ctx, t, admin, "no-incr", without(aclLockUser, "+incr")...)
		err := try(t, withUser(t, g.URL(), "no-incr", aclPassword))
		check(t, err, "can't run this command")
		if !errors.Is(err, distlock.ErrInvalidConfig) {
			t.Errorf("a refused script command: %v, want ErrInvalidConfig", err)
		}
	})
	t.Run("no channels", func(t *testing.T) {
		// Keys granted, channels not (Redis 7's default for a new user):
		// the release script's PUBLISH is refused inside the script
		// (Redis 7.0: "can't publish to the channel", 7.2: "ACL failure
		// in script"): a configuration error, not an unreachable store.
		setACLUser(ctx, t, admin, "no-channels", without(aclLockUser, "&distlock:*")...)
		err := try(t, withUser(t, g.URL(), "no-channels", aclPassword))
		check(t, err, "publish")
		if !errors.Is(err, distlock.ErrInvalidConfig) || errors.Is(err, distlock.ErrUnavailable) {
			t.Errorf("a PUBLISH refused inside a script: %v, want ErrInvalidConfig (no retry fixes it)", err)
		}
	})
	t.Run("wait_replicas without wait", func(t *testing.T) {
		// The acquire script and WAIT go out in one pipeline: the script
		// takes the lock, then the ACL refuses WAIT. The grant must be
		// given back, not left to a ghost until its TTL.
		err := try(t, withUser(t, g.URL(), "locker", aclPassword)+"?wait_replicas=1")
		check(t, err, "NOPERM")
		if !errors.Is(err, distlock.ErrInvalidConfig) {
			t.Errorf("a refused WAIT: %v, want ErrInvalidConfig", err)
		}
		n, kerr := admin.Exists(ctx, redisproto.KeysFor(DefaultPrefix, "acl-"+strings.ReplaceAll(t.Name(), "/", "-")).Lock).Result()
		if kerr != nil {
			t.Fatal(kerr)
		}
		if n != 0 {
			t.Errorf("the lock is still held after its WAIT was refused (a ghost until its TTL)")
		}
	})
	t.Run("no publish", func(t *testing.T) {
		// The release script deletes the lock and then publishes: Redis
		// does not roll a script back, so the lock is gone although the
		// release reports an error.
		setACLUser(ctx, t, admin, "no-publish", without(aclLockUser, "+publish")...)
		err := try(t, withUser(t, g.URL(), "no-publish", aclPassword))
		check(t, err, "can't run this command")
		if !strings.Contains(err.Error(), "release") {
			t.Errorf("the failure is not the release's: %v", err)
		}
		if !errors.Is(err, distlock.ErrInvalidConfig) || errors.Is(err, distlock.ErrUnavailable) {
			t.Errorf("a release refused at PUBLISH: %v, want ErrInvalidConfig (no retry fixes it)", err)
		}
		held, kerr := admin.HExists(ctx, redisproto.KeysFor(DefaultPrefix, "acl-"+strings.ReplaceAll(t.Name(), "/", "-")).Lock, "o").Result()
		if kerr != nil {
			t.Fatal(kerr)
		}
		if held {
			t.Errorf("the lock is still held after the release script failed at PUBLISH")
		}
	})
	t.Run("Acquire with a wrong password", func(t *testing.T) {
		// Acquire retries ErrUnavailable until its ctx ends; a refused
		// password is ErrInvalidConfig, which no retry fixes: it returns
		// at once. (Open refuses the password: New does not dial.)
		c := redis.NewClient(&redis.Options{Addr: g.Node(0).Addr(), Username: "locker", Password: "wrong-" + aclPassword,
			MaxRetries: -1, ContextTimeoutEnabled: true})
		l := lockerOver(t, c)
		actx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := l.Acquire(actx, "acl-acquire")
		took := time.Since(start)
		check(t, err, "WRONGPASS")
		t.Logf("Acquire returned after %v; ErrUnavailable=%v ErrInvalidConfig=%v",
			took.Round(time.Millisecond), errors.Is(err, distlock.ErrUnavailable), errors.Is(err, distlock.ErrInvalidConfig))
		if !errors.Is(err, distlock.ErrInvalidConfig) || errors.Is(err, distlock.ErrUnavailable) {
			t.Errorf("a refused password: %v, want ErrInvalidConfig (not ErrUnavailable)", err)
		}
		if took > 400*time.Millisecond {
			t.Errorf("Acquire took %v with a 500ms ctx: it retried a refused password", took)
		}
	})
}

// A database number the server does not have is a configuration error,
// reported by Open (a CLI exits 64, not 69), not an unreachable store.
func TestOpenDatabaseOutOfRange(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	u := sandbox.RedisURL(g.Addrs()...) + "/17"
	_, err := distlock.Open(testCtx(t, time.Minute), u)
	if !errors.Is(err, distlock.ErrInvalidConfig) || errors.Is(err, distlock.ErrUnavailable) || !strings.Contains(err.Error(), "database 17") {
		t.Fatalf("Open(%s) = %v, want ErrInvalidConfig naming database 17", u, err)
	}
}
