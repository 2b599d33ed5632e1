package sqllock_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
	"github.com/distlock/distlock/sqllock"
)

// pgSeqBits mirrors PostgreSQL's token layout: epoch<<pgSeqBits | seq.
const pgSeqBits = 32

// pgEpochOf reads key's durable fencing epoch (0: none); the fence row's
// token column holds epoch<<pgSeqBits. It retries while the server comes
// back after a restart.
func pgEpochOf(t *testing.T, s *pgServer, key string) uint64 {
	t.Helper()
	var base uint64
	q := fmt.Sprintf(`SELECT coalesce((SELECT token FROM "%s%s" WHERE name = $1), 0)`, testTable, sqllock.FenceSuffix)
	pgRetry(t, func() error { return s.admin.QueryRowContext(ctxFor(t, 10*time.Second), q, []byte(key)).Scan(&base) })
	if base&(1<<pgSeqBits-1) != 0 {
		t.Fatalf("the fence row of %q holds %d, not an epoch's base", key, base)
	}
	return base >> pgSeqBits
}

// pgLiveRows counts key's rows in the UNLOGGED live counter table.
func pgLiveRows(t *testing.T, s *pgServer, key string) int {
	t.Helper()
	var n int
	q := fmt.Sprintf(`SELECT count(*) FROM "%s%s" WHERE name = $1`, testTable, sqllock.LiveSuffix)
	pgRetry(t, func() error { return s.admin.QueryRowContext(ctxFor(t, 10*time.Second), q, []byte(key)).Scan(&n) })
	return n
}

// pgRetry runs f until it succeeds, for at most a minute (the server may
// be coming back from a crash).
func pgRetry(t *testing.T, f func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pgSteady takes key three times and checks the steady state: consecutive
// tokens of one epoch, the durable epoch untouched. It returns the epoch
// and the last token.
func pgSteady(t *testing.T, s *pgServer, l *distlock.Locker, key string) (epoch, last uint64) {
	t.Helper()
	first := takeRelease(t, l, key)
	epoch = pgEpochOf(t, s, key)
	if epoch == 0 || first>>pgSeqBits != epoch {
		t.Fatalf("token %d, durable epoch %d: want a token of that epoch", first, epoch)
	}
	last = first
	for i := range 3 {
		tok := takeRelease(t, l, key)
		if tok != last+1 {
			t.Errorf("steady-state grant %d: token %d after %d, want the next in the epoch", i, tok, last)
		}
		last = tok
	}
	if e := pgEpochOf(t, s, key); e != epoch {
		t.Errorf("durable epoch moved from %d to %d in steady state", epoch, e)
	}
	return epoch, last
}

// pgNewEpoch checks that the next grant of key is the first token of the
// epoch after epoch, above last.
func pgNewEpoch(t *testing.T, s *pgServer, l *distlock.Locker, key string, epoch, last uint64) {
	t.Helper()
	tok := takeRelease(t, l, key)
	if tok <= last {
		t.Fatalf("token %d, not above %d before", tok, last)
	}
	if e := pgEpochOf(t, s, key); e != epoch+1 || tok != e<<pgSeqBits|1 {
		t.Errorf("token %d, epoch %d; want the first token of epoch %d", tok, e, epoch+1)
	}
	if next := takeRelease(t, l, key); next != tok+1 {
		t.Errorf("token %d after %d, want the next in the new epoch", next, tok)
	}
}

// TestPostgresTokensAcrossCrash: a crash of the server (SIGKILL of every
// process) makes crash recovery empty the UNLOGGED live counters; the next
// grant starts a new durable epoch, above every token before the crash.
func TestPostgresTokensAcrossCrash(t *testing.T) {
	s := startPG(t)
	l, _ := newPGLockerOpts(t, s, 5*time.Second, sqllock.Options{})
	key := uniqueKey("pg-crash")
	epoch, last := pgSteady(t, s, l, key)

	ctx := ctxFor(t, 3*time.Minute)
	if err := s.g.Node(0).Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.g.Node(0).Start(ctx); err != nil {
		t.Fatal(err)
	}
	if n := pgLiveRows(t, s, key); n != 0 {
		t.Fatalf("crash recovery left %d live counter rows", n)
	}
	d, _ := newPGDriver(t, s, sqllock.Options{})
	info, err := d.Inspect(ctxFor(t, 10*time.Second), key, backend.Exclusive)
	if err != nil || info.Held || info.Token != 0 {
		t.Errorf("Inspect after the crash = %+v, %v; want free, token unknown (0)", info, err)
	}
	pgNewEpoch(t, s, l, key, epoch, last)
}

// TestPostgresTokensAcrossBackendCrash: SIGKILL of one backend makes the
// postmaster restart every backend through crash recovery, which empties
// the live counters as a whole-server crash does. Local provider only (the
// backend's pid is a host pid there).
func TestPostgresTokensAcrossBackendCrash(t *testing.T) {
	s := startPG(t)
	if s.g.Provider() != sandbox.ProviderLocal {
		t.Skipf("signals a backend by its pid: local provider only (this is %q)", s.g.Provider())
	}
	l, _ := newPGLockerOpts(t, s, 5*time.Second, sqllock.Options{})
	key := uniqueKey("pg-backend-crash")
	epoch, last := pgSteady(t, s, l, key)

	c, err := s.admin.Conn(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := c.QueryRowContext(ctxFor(t, 10*time.Second), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if n := pgLiveRows(t, s, key); n != 0 {
		t.Fatalf("crash recovery left %d live counter rows", n)
	}
	pgNewEpoch(t, s, l, key, epoch, last)
}

// TestPostgresTokensCleanRestart: a clean shutdown writes the UNLOGGED
// table out, so the live counters survive a clean restart and tokens go on
// in the same epoch (no durable write); they increase either way.
func TestPostgresTokensCleanRestart(t *testing.T) {
	s := startPG(t)
	l, _ := newPGLockerOpts(t, s, 5*time.Second, sqllock.Options{})
	key := uniqueKey("pg-clean-restart")
	epoch, last := pgSteady(t, s, l, key)
	ctx := ctxFor(t, 3*time.Minute)
	if err := s.g.Node(0).Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.g.Node(0).Start(ctx); err != nil {
		t.Fatal(err)
	}
	tok := takeRelease(t, l, key)
	if tok <= last {
		t.Fatalf("token %d after the clean restart, not above %d before it", tok, last)
	}
	if e := pgEpochOf(t, s, key); tok != last+1 || e != epoch {
		t.Errorf("after a clean restart: token %d, epoch %d; want %d in epoch %d (the live counter kept)", tok, e, last+1, epoch)
	}
}

// TestPostgresTokenMissingCounter: a key whose live counter row is gone
// (deleted here, as crash recovery would) starts a new durable epoch.
func TestPostgresTokenMissingCounter(t *testing.T) {
	s := startPG(t)
	l, _ := newPGLockerOpts(t, s, 5*time.Second, sqllock.Options{})
	key := uniqueKey("pg-missing")
	epoch, last := pgSteady(t, s, l, key)
	_, err := s.admin.ExecContext(ctxFor(t, 10*time.Second),
		fmt.Sprintf(`DELETE FROM "%s%s" WHERE name = $1`, testTable, sqllock.LiveSuffix), []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	pgNewEpoch(t, s, l, key, epoch, last)
}

// TestPostgresTokenEpochEnd: a live counter at the last token of its
// epoch is not moved into the next epoch's range; a new durable epoch
// starts instead.
func TestPostgresTokenEpochEnd(t *testing.T) {
	s := startPG(t)
	l, _ := newPGLockerOpts(t, s, 5*time.Second, sqllock.Options{})
	key := uniqueKey("pg-epochend")
	epoch, _ := pgSteady(t, s, l, key)
	_, err := s.admin.ExecContext(ctxFor(t, 10*time.Second),
		fmt.Sprintf(`UPDATE "%s%s" SET token = token | %d WHERE name = $1`, testTable, sqllock.LiveSuffix, uint64(1)<<pgSeqBits-1), []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	pgNewEpoch(t, s, l, key, epoch, epoch<<pgSeqBits|(1<<pgSeqBits-1))
}
