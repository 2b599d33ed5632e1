package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"github.com/distlock/distlock/backend"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock"
	"github.com/go-sql-driver/mysql"
)

// TestOpenURLErrors: bad URLs fail before dialling, name the bad part, and
// never show the password.
func TestOpenURLErrors(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"mysql://u:s3cret@127.0.0.1:1/app?table=a-b", "table"},
		{"mysql://u:s3cret@127.0.0.1:1/app?table=a%60b", "table"},
		{"mysql://u:s3cret@127.0.0.1:1/app?table=" + strings.Repeat("t", 59), "table"},
		{"mysql://u:s3cret@127.0.0.1:1/app?bogus=1", "bogus"},
		{"mysql://u:s3cret@127.0.0.1:1/", "DBNAME"},
		{"mysql://u:s3cret@h1:1,h2:2/app", "one host"},
		{"mysql://u:s3cret@127.0.0.1:1/app?tls=maybe", "tls"},
		{"mysql://u:s3cret@127.0.0.1:1/app?tls_ca=/nonexistent.pem", "tls_ca"},
		{"mysql://u:s3cret@127.0.0.1:1/app?lock_wait_timeout=-1s", "lock_wait_timeout"},
	} {
		_, err := distlock.Open(context.Background(), tc.url)
		if !errors.Is(err, distlock.ErrInvalidConfig) {
			t.Errorf("Open(%q) = %v, want ErrInvalidConfig", tc.url, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) error %q does not name %q", tc.url, err, tc.want)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) error shows the password: %v", tc.url, err)
		}
	}
}

func TestDDL(t *testing.T) {
	ddl, err := sqllock.DDL("app_locks")
	if err != nil || len(ddl) != 6 {
		t.Fatalf("DDL = %q, %v", ddl, err)
	}
	for _, want := range []string{"CREATE TABLE IF NOT EXISTS `app_locks`", "PRIMARY KEY (name)"} {
		if !strings.Contains(ddl[0], want) {
			t.Errorf("lock table DDL lacks %q:\n%s", want, ddl[0])
		}
	}
	if !strings.Contains(ddl[1], "`app_locks_fence`") || !strings.Contains(ddl[1], "InnoDB") {
		t.Errorf("fence table DDL:\n%s", ddl[1])
	}
	if !strings.Contains(ddl[2], "`app_locks_live`") || !strings.Contains(ddl[2], "ENGINE=MEMORY") {
		t.Errorf("live counter table DDL:\n%s", ddl[2])
	}
	if !strings.Contains(ddl[3], "`app_locks_sem`") || !strings.Contains(ddl[3], "PRIMARY KEY (name, slot)") {
		t.Errorf("semaphore slot table DDL:\n%s", ddl[3])
	}
	if !strings.Contains(ddl[4], "`app_locks"+sqllock.ModeSuffix+"`") {
		t.Errorf("mode table DDL:\n%s", ddl[4])
	}
	if !strings.HasPrefix(ddl[5], "CREATE PROCEDURE IF NOT EXISTS `app_locks"+sqllock.ProcSuffix+"`(") ||
		!strings.Contains(ddl[5], "FOR UPDATE") || !strings.Contains(ddl[5], "`app_locks_live`") {
		t.Errorf("procedure DDL:\n%s", ddl[5])
	}
	if _, err := sqllock.DDL("x; DROP TABLE y"); !errors.Is(err, distlock.ErrInvalidConfig) {
		t.Errorf("DDL of a bad name = %v", err)
	}
}

// TestNewOptions: New takes *Options like the other drivers' New; it never
// changes the caller's struct, and a bad option fails before dialling.
func TestNewOptions(t *testing.T) {
	conn, err := mysql.NewConnector(&mysql.Config{Net: "tcp", Addr: "127.0.0.1:1", DBName: "app"})
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn) // never dials: no statement is sent
	defer db.Close()
	ctx := context.Background()
	opts := &sqllock.Options{NoCreateTable: true}
	d, err := sqllock.New(ctx, db, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_ = d.Close()
	if *opts != (sqllock.Options{NoCreateTable: true}) {
		t.Errorf("New changed the caller's Options to %+v", *opts)
	}
	if _, err := sqllock.New(ctx, db, &sqllock.Options{Table: "a-b"}); !errors.Is(err, distlock.ErrInvalidConfig) {
		t.Errorf("New with a bad table = %v, want ErrInvalidConfig", err)
	}
	// nil means defaults: New goes on to create the tables, and fails to dial.
	if _, err := sqllock.New(ctx, db, nil); err == nil || errors.Is(err, distlock.ErrInvalidConfig) {
		t.Errorf("New(nil opts) over an unreachable server = %v, want a connection error", err)
	}
	if _, err := sqllock.New(ctx, nil, nil); !errors.Is(err, distlock.ErrInvalidConfig) {
		t.Errorf("New(nil db, nil opts) = %v, want ErrInvalidConfig", err)
	}
}

// TestPostgresURL: postgres:// and postgresql:// open a Driver; bad
// parameters are named; a wrong password fails without showing it.
func TestPostgresURL(t *testing.T) {
	s := startPG(t)
	for _, scheme := range []string{"postgres", "postgresql"} {
		u := strings.Replace(pgURL(s.addr()), "postgres://", scheme+"://", 1) + "&table=" + testTable + "&lock_wait_timeout=2s"
		l, err := distlock.Open(ctxFor(t, 30*time.Second), u, distlock.WithDefaultTTL(5*time.Second))
		if err != nil {
			t.Fatalf("Open(%s://): %v", scheme, err)
		}
		le, err := l.Acquire(ctxFor(t, 10*time.Second), uniqueKey("pg-url"))
		if err != nil {
			t.Fatalf("%s: Acquire: %v", scheme, err)
		}
		release(t, le)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	base := pgURL(s.addr())
	for _, tc := range []struct{ url, want string }{
		{base + "&sslmode=sometimes", "sslmode"},
		{base + "&table=no-dash", "table"},
		{base + "&colour=blue", "colour"},
		{base + "&sslcert=/tmp/x.pem", "sslkey"},
		{strings.Replace(base, "/"+dbName, "/", 1), "DBNAME"},
	} {
		_, err := distlock.Open(ctxFor(t, 10*time.Second), tc.url)
		if !errors.Is(err, backend.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%s): %v, want ErrInvalidConfig naming %q", tc.url, err, tc.want)
		}
	}
	const bad = "Wr0ng-pw-4e1c"
	wrong := strings.Replace(base, ":"+pgPassword+"@", ":"+bad+"@", 1)
	_, err := distlock.Open(ctxFor(t, 10*time.Second), wrong)
	if err == nil || !strings.Contains(err.Error(), "password authentication failed") {
		t.Errorf("a wrong password: %v, want the server's refusal", err)
	}
	if err != nil && strings.Contains(err.Error(), bad) {
		t.Errorf("the error shows the password: %v", err)
	}
}
