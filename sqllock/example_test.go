package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"time"

	_ "github.com/go-sql-driver/mysql" // registers "mysql" with database/sql

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock"
)

// Open checks the URL before dialling: a bad table name is a configuration
// error, and the password never appears in it.
func Example_invalidURL() {
	_, err := distlock.Open(context.Background(), "mysql://app:secret@db.internal:3306/app?table=app-locks")
	fmt.Println(errors.Is(err, distlock.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// true
	// distlock: open mysql://app:xxxxx@db.internal:3306/app?table=app-locks: sqllock: invalid configuration: parameter table="app-locks": want letters, digits or underscores (at most 58), not starting with a digit
}

// DDL prints the statements a DBA runs to create the tables by hand.
func ExampleDDL() {
	ddl, err := sqllock.DDL("app_locks")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ddl[0])
	// Output:
	// CREATE TABLE IF NOT EXISTS `app_locks` (
	//   name VARBINARY(1024) NOT NULL,
	//   PRIMARY KEY (name)
	// ) ENGINE=InnoDB
}

// Build the driver over the *sql.DB the program already has. New creates
// the lock tables if they are missing (NoCreateTable skips that, for a user
// without the CREATE privilege: see DDL). Each held lock keeps one of db's
// connections, so leave room for them in db.SetMaxOpenConns. The driver
// never closes db: close it after the Locker.
func ExampleNew() {
	db, err := sql.Open("mysql", "app:secret@tcp(db.internal:3306)/app")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := sqllock.New(ctx, db, &sqllock.Options{Table: "app_locks"})
	if err != nil {
		log.Fatal(err)
	}
	locker := distlock.New(d) // owns d, not db
	defer locker.Close()

	err = locker.Do(ctx, "schema-migrations", func(ctx context.Context) error {
		fmt.Println("migrating") // ctx ends if the lock is lost
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Pass the fencing token into the write itself. The row remembers the
// token of its last write (a column fence BIGINT UNSIGNED NOT NULL DEFAULT
// 0), and the UPDATE matches only while no holder with a greater token has
// written: a holder that lost its lock (paused, cut off) and writes late
// changes nothing, and RowsAffected tells it so. This strict form allows one
// write per lease; for several, also store the owner (docs/safety.md).
// The column is 64-bit: tokens are uint64, and PostgreSQL's start at
// 4294967297 (epoch << 32 | 1), past what an INT column holds.
func Example_fencedUpdate() {
	db, err := sql.Open("mysql", "app:secret@tcp(db.internal:3306)/app")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	d, err := sqllock.New(ctx, db, nil)
	if err != nil {
		log.Fatal(err)
	}
	locker := distlock.New(d)
	defer locker.Close()

	lease, err := locker.Acquire(ctx, "invoice/42")
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = lease.Release(ctx)
	}()

	res, err := db.ExecContext(ctx,
		"UPDATE invoices SET status = ?, fence = ? WHERE id = ? AND fence < ?",
		"paid", lease.Token(), 42, lease.Token())
	if err != nil {
		log.Fatal(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		log.Fatal(err)
	}
	if n == 0 {
		// A holder with a greater token wrote first (or there is no
		// invoice 42): this lease is stale, and retrying cannot help.
		fmt.Println("invoice 42 not updated")
		return
	}
	fmt.Println("invoice 42 paid")
}

// A PostgreSQL lock: the URL's scheme picks the dialect (postgres:// or
// postgresql://); libpq's sslmode, sslrootcert, sslcert and sslkey
// configure TLS.
func Example_postgres() {
	ctx := context.Background()
	l, err := distlock.Open(ctx, "postgres://app:secret@db.internal:5432/app?sslmode=verify-full&sslrootcert=/etc/ssl/db-ca.pem&ttl=30s")
	if err != nil {
		log.Print(err)
		return
	}
	defer l.Close()
	le, err := l.Acquire(ctx, "invoices/2026-11")
	if err != nil {
		log.Print(err)
		return
	}
	defer le.Release(ctx)
	fmt.Println("fencing token", le.Token())
}

// PostgresDDL prints the PostgreSQL tables for a DBA to create by hand.
func ExamplePostgresDDL() {
	ddl, err := sqllock.PostgresDDL("app_locks")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ddl[0])
	// Output:
	// CREATE TABLE IF NOT EXISTS "app_locks" (
	//   name bytea NOT NULL PRIMARY KEY
	// )
}
