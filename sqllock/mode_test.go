package sqllock_test

import (
	"database/sql"
	"errors"
	"github.com/distlock/distlock"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
)

// TestPostgresModeMixRefused: row mode and advisory mode lock different
// things (a row, an advisory lock), so clients of both on one table would
// each hold the same key. The table records the mode of its first client;
// a client of the other mode is refused at New, with ErrInvalidConfig
// naming both modes, whichever mode came first; session mode
// (session-level advisory locks on shared sessions) is a third.
func TestPostgresModeMixRefused(t *testing.T) {
	s := startPG(t)
	modes := []string{"row", "advisory", "session"}
	for _, first := range modes {
		for _, second := range modes {
			if second == first {
				continue
			}
			testModeMix(t, s, first, second)
		}
	}
}

// testModeMix: a client in mode second on a table first used in mode
// first is refused.
func testModeMix(t *testing.T, s *server, first, second string) {
	{
		t.Run(first+"-then-"+second, func(t *testing.T) {
			table := "distlock_test_mix_" + first[:3] + second[:3] + "_" + strings.TrimPrefix(uniqueKey(""), "sqllock-test--")
			opts := func(mode string) *sqllock.Options {
				return &sqllock.Options{Table: table, Advisory: mode == "advisory", Session: mode == "session"}
			}
			a, err := sqllock.New(ctxFor(t, 30*time.Second), s.admin, opts(first))
			if err != nil {
				t.Fatalf("New in %s mode: %v", first, err)
			}
			defer a.Close()
			b, err := sqllock.New(ctxFor(t, 30*time.Second), s.admin, opts(second))
			if err == nil {
				defer b.Close()
				key := uniqueKey("mix")
				ga, erra := a.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "owner-a-0123456789abcdef", TTL: 30 * time.Second})
				gb, errb := b.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "owner-b-0123456789abcdef", TTL: 30 * time.Second})
				if erra == nil && errb == nil {
					t.Errorf("a %s-mode client and a %s-mode client on table %s both hold %q (tokens %d and %d)", first, second, table, key, ga.Token, gb.Token)
				}
				for _, g := range []backend.Grant{ga, gb} {
					if g.Lock != nil {
						_ = g.Lock.Release(ctxFor(t, 10*time.Second))
					}
				}
				t.Fatalf("New in %s mode on a table used in %s mode succeeded, want ErrInvalidConfig", second, first)
			}
			t.Logf("New in %s mode after %s mode: %v", second, first, err)
			if !errors.Is(err, backend.ErrInvalidConfig) || !strings.Contains(err.Error(), first) || !strings.Contains(err.Error(), second) {
				t.Errorf("New in %s mode on a %s-mode table = %v, want ErrInvalidConfig naming both modes", second, first, err)
			}
			// The first mode's clients go on starting.
			c, err := sqllock.New(ctxFor(t, 30*time.Second), s.admin, opts(first))
			if err != nil {
				t.Fatalf("a second New in %s mode: %v", first, err)
			}
			_ = c.Close()
		})
	}
}

// TestPostgresModeUnrecorded: a table used before modes were recorded.
// Its lock table has rows, so row-mode clients of that version may still
// run: an advisory-mode Driver refuses to record its mode there, and a
// row-mode one records row. Tables made by hand without the mode table
// (NoCreateTable) are refused, naming it.
func TestPostgresModeUnrecorded(t *testing.T) {
	s := startPG(t)
	table := "distlock_test_unrec_" + strings.TrimPrefix(uniqueKey(""), "sqllock-test--")
	old, err := sqllock.New(ctxFor(t, 30*time.Second), s.admin, &sqllock.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	g, err := old.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: uniqueKey("unrec"), Owner: "owner-old-0123456789abcde", TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = g.Lock.Release(ctxFor(t, 10*time.Second)); _ = old.Close() }()
	// As a version that records no mode left it.
	if _, err := s.admin.ExecContext(ctxFor(t, 10*time.Second), `DELETE FROM "`+table+sqllock.ModeSuffix+`"`); err != nil {
		t.Fatal(err)
	}
	_, err = sqllock.New(ctxFor(t, 30*time.Second), s.admin, &sqllock.Options{Table: table, Advisory: true})
	t.Logf("advisory New on an unrecorded table with lock rows: %v", err)
	if !errors.Is(err, backend.ErrInvalidConfig) || !strings.Contains(err.Error(), "row mode") || !strings.Contains(err.Error(), "advisory mode") {
		t.Errorf("advisory New on an unrecorded table with lock rows = %v, want ErrInvalidConfig naming both modes", err)
	}
	row, err := sqllock.New(ctxFor(t, 30*time.Second), s.admin, &sqllock.Options{Table: table})
	if err != nil {
		t.Fatalf("row-mode New on an unrecorded row-mode table: %v", err)
	}
	_ = row.Close()

	hand := "distlock_test_hand_" + strings.TrimPrefix(uniqueKey(""), "sqllock-test--")
	ddl, err := sqllock.PostgresDDL(hand)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ddl[len(ddl)-1], hand+sqllock.ModeSuffix) {
		t.Fatalf("PostgresDDL's last statement is not the mode table:\n%s", ddl[len(ddl)-1])
	}
	for _, q := range ddl[:len(ddl)-1] { // as from an earlier PostgresDDL
		if _, err := s.admin.ExecContext(ctxFor(t, 10*time.Second), q); err != nil {
			t.Fatal(err)
		}
	}
	_, err = sqllock.New(ctxFor(t, 30*time.Second), s.admin, &sqllock.Options{Table: hand, NoCreateTable: true})
	t.Logf("New with NoCreateTable and no mode table: %v", err)
	if !errors.Is(err, backend.ErrInvalidConfig) || !strings.Contains(err.Error(), hand+sqllock.ModeSuffix) {
		t.Errorf("New with NoCreateTable and no mode table = %v, want ErrInvalidConfig naming it", err)
	}
}

// TestPostgresAdvisoryMode: with mode=advisory a held key is an advisory
// lock in pg_locks and no row of the lock table; a bare
// pg_try_advisory_xact_lock elsewhere on another key is not disturbed;
// mode= takes row or advisory only, and Advisory over MySQL is refused.
func TestPostgresAdvisoryMode(t *testing.T) {
	s := startPG(t)
	table := "distlock_test_advisory"
	u := pgURL(s.addr()) + "&mode=advisory&table=" + table
	l, err := distlock.Open(ctxFor(t, 30*time.Second), u, distlock.WithDefaultTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	key := uniqueKey("pg-advisory")
	le, err := l.Acquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	var advisory, tables int
	if err := s.admin.QueryRowContext(ctxFor(t, 10*time.Second),
		"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted").Scan(&advisory); err != nil {
		t.Fatal(err)
	}
	if advisory != 1 {
		t.Errorf("%d advisory locks granted while one key is held, want 1", advisory)
	}
	if err := s.admin.QueryRowContext(ctxFor(t, 10*time.Second),
		"SELECT count(*) FROM pg_tables WHERE tablename = $1", table).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("advisory mode created the lock table %s", table)
	}
	if _, err := l.TryAcquire(ctxFor(t, 10*time.Second), key); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Errorf("TryAcquire of a held key: %v, want ErrNotAcquired", err)
	}
	release(t, le)
	if _, err := distlock.Open(ctxFor(t, 10*time.Second), pgURL(s.addr())+"&mode=gentle"); !errors.Is(err, backend.ErrInvalidConfig) || !strings.Contains(err.Error(), "mode") {
		t.Errorf("mode=gentle: %v, want ErrInvalidConfig naming mode", err)
	}
}

// TestAdvisoryNeedsPostgres: Options.Advisory over a MySQL *sql.DB is a
// configuration error (no connection is made).
func TestAdvisoryNeedsPostgres(t *testing.T) {
	db, err := sql.Open("mysql", "u:p@tcp(127.0.0.1:1)/db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = sqllock.New(ctxFor(t, 5*time.Second), db, &sqllock.Options{Advisory: true})
	if !errors.Is(err, backend.ErrInvalidConfig) || !strings.Contains(err.Error(), "Advisory") {
		t.Errorf("Advisory over MySQL: %v, want ErrInvalidConfig naming Advisory", err)
	}
}

// TestMySQLModeMixRefused: row mode (SELECT ... FOR UPDATE) and session
// mode (GET_LOCK) lock different things; the table records the mode of
// its first client and a client of the other is refused at New with
// ErrInvalidConfig naming both.
func TestMySQLModeMixRefused(t *testing.T) {
	s := startShared(t, false)
	for _, tc := range [][2]string{{"row", "session"}, {"session", "row"}} {
		first, second := tc[0], tc[1]
		t.Run(first+"-then-"+second, func(t *testing.T) {
			table := "distlock_test_mix_" + first[:3] + second[:3] + "_" + strings.TrimPrefix(uniqueKey(""), "sqllock-test--")
			a, err := sqllock.New(ctxFor(t, 30*time.Second), s.admin, &sqllock.Options{Table: table, Session: first == "session"})
			if err != nil {
				t.Fatalf("New in %s mode: %v", first, err)
			}
			defer a.Close()
			b, err := sqllock.New(ctxFor(t, 30*time.Second), s.admin, &sqllock.Options{Table: table, Session: second == "session"})
			if err == nil {
				_ = b.Close()
				t.Fatalf("New in %s mode on a table used in %s mode succeeded, want ErrInvalidConfig", second, first)
			}
			t.Logf("New in %s mode after %s mode: %v", second, first, err)
			if !errors.Is(err, backend.ErrInvalidConfig) || !strings.Contains(err.Error(), first+" mode") || !strings.Contains(err.Error(), second+" mode") {
				t.Errorf("New in %s mode on a %s-mode table = %v, want ErrInvalidConfig naming both modes", second, first, err)
			}
		})
	}
}
