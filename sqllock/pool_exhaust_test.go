package sqllock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sandbox"
	"github.com/distlock/distlock/sqllock"
)

// A pool whose every connection is taken (pgxpool's default MaxConns is 4
// on 2 cores) must not make a call outlive its ctx: a waiter whose ctx
// ends is interrupted without a connection of the pool (PostgreSQL's
// cancel request), and a call that found no free connection says so
// (issue 32, item 5: a 3 s ctx returned after 8 s).
func TestFullPoolHonoursCtx(t *testing.T) {
	addr := startPG(t).addr()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(sandbox.PostgresURL(addr))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	d, err := sqllock.NewPool(ctx, pool, &sqllock.Options{Table: "full_pool"})
	if err != nil {
		t.Fatal(err)
	}
	l := distlock.New(d)
	defer l.Close()
	base := uniqueKey(t.Name())

	// bounded runs f with a 1 s ctx and fails t if f outlives it by more
	// than slack.
	const bound, slack = time.Second, 700 * time.Millisecond
	bounded := func(what string, f func(ctx context.Context) error) error {
		t.Helper()
		actx, acancel := context.WithTimeout(ctx, bound)
		defer acancel()
		start := time.Now()
		err := f(actx)
		took := time.Since(start)
		t.Logf("%s: %v after %v", what, err, took.Round(time.Millisecond))
		if took > bound+slack {
			t.Errorf("%s took %v with a %v ctx", what, took.Round(time.Millisecond), bound)
		}
		return err
	}

	// Three holders: a fourth connection is left for one acquisition.
	var held []*distlock.Lease
	defer func() {
		for _, le := range held {
			_ = le.Release(ctx)
		}
	}()
	for i := range 3 {
		le, err := l.TryAcquire(ctx, fmt.Sprintf("%s-%d", base, i))
		if err != nil {
			t.Fatalf("holder %d: %v", i, err)
		}
		held = append(held, le)
	}
	// A waiter on a held key pins the fourth connection; when its ctx
	// ends it must be interrupted without a fifth.
	err = bounded("Acquire of a held key, the pool's last connection", func(ctx context.Context) error {
		_, err := l.Acquire(ctx, base+"-0")
		return err
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire: %v, want the ctx's deadline", err)
	}
	// A fourth acquisition takes the last connection for its row lock
	// and needs one more for its fencing token: it finds none, and says
	// so within its ctx.
	err = bounded("TryAcquire needing a fifth connection", func(ctx context.Context) error {
		_, err := l.TryAcquire(ctx, base+"-3")
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "4 of 4 connections in use") {
		t.Errorf("TryAcquire needing a fifth connection: %v, want an error naming the pool's 4 of 4 connections in use", err)
	}
	// The pool is whole again: nothing leaked.
	le, err := l.TryAcquire(ctx, base+"-0")
	if err == nil || !errors.Is(err, distlock.ErrNotAcquired) {
		t.Errorf("TryAcquire of a held key after the timeouts: %v, want ErrNotAcquired", err)
	}
	_ = le
}

// A MySQL waiter canceled while every connection of a bounded *sql.DB is
// in use cannot send KILL QUERY: after the grace period its connection is
// closed, and the error says the ctx's error once, matching no
// ErrUnavailable (issue 32, item 8: "context canceled (store
// unavailable: context canceled)").
func TestFullPoolCanceledWaitReadsOnce(t *testing.T) {
	s := startServer(t)
	db := s.newDB(s.addr, false)
	defer db.Close()
	db.SetMaxOpenConns(2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := sqllock.New(ctx, db, &sqllock.Options{Table: "full_pool", NoProcedure: true})
	if err != nil {
		t.Fatal(err)
	}
	l := distlock.New(d)
	defer l.Close()
	key := uniqueKey(t.Name())
	le, err := l.TryAcquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer le.Release(ctx)
	wctx, wcancel := context.WithCancel(ctx)
	time.AfterFunc(300*time.Millisecond, wcancel)
	_, err = l.Acquire(wctx, key)
	t.Logf("error: %v", err)
	if !errors.Is(err, context.Canceled) || errors.Is(err, distlock.ErrUnavailable) {
		t.Errorf("Acquire: %v, want context.Canceled and not ErrUnavailable", err)
	}
	if n := strings.Count(err.Error(), "context canceled"); n != 1 {
		t.Errorf("Acquire: %q says context canceled %d times, want once", err, n)
	}
}
