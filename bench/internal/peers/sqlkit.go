package peers

import (
	"context"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
)

// sqlKit is what the peers of a SQL store need of its client library
// (database/sql with go-sql-driver for MySQL, a pgx pool for PostgreSQL):
// over either, sqlKit.store builds the same peers, fenced floors,
// distlock and floor, which differ only in what they say (sqlAbout).
type sqlKit[DB any] struct {
	// open opens a client of the store whose connections go through cut
	// (nil: plain connections).
	open  func(ctx context.Context, cut *cutter) (DB, error)
	close func(DB)
	// lock is the store's own lock (GET_LOCK, pg_advisory_lock) on db.
	lock func(db DB) client
	// forUpdate is the FOR UPDATE peer on db; it closes db if it fails.
	forUpdate func(ctx context.Context, db DB) (client, error)
	// fence makes the fenced floors' counter on db.
	fence func(ctx context.Context, db DB) (func(context.Context, string) (int64, error), error)
	// driver is sqllock's driver over db.
	driver    func(ctx context.Context, db DB, o *sqllock.Options) (backend.Driver, error)
	selectOne func(ctx context.Context, db DB) error
	info      func(ctx context.Context, db DB) (Info, error)
	counters  func(ctx context.Context, db DB) (requests, fsyncs float64, err error)
}

// sqlAbout is what a SQL store's peers say about themselves.
type sqlAbout struct {
	module          string // the client library's
	lock, lockAbout string // the store's own lock peer: its name and About
	forUpdate       string // the FOR UPDATE peer's About
	session         string // distlock's session mode's About
	fencedForUpdate string // the fenced floors' Abouts
	fencedLock      string
	conns           string // the store's Conns
	distlock        string // distlock's About
}

// store builds the Store of the SQL store k opens, saying what a says.
func (k sqlKit[DB]) store(a sqlAbout) *Store {
	return &Store{
		Peers: []Peer{
			peer(a.lock, a.lockAbout, func(ctx context.Context, _ time.Duration, cut *cutter) (client, error) {
				db, err := k.open(ctx, cut)
				if err != nil {
					return nil, err
				}
				return k.lock(db), nil
			}).from(a.module, "1 (pinned while held)"),
			peer("FOR UPDATE", a.forUpdate, func(ctx context.Context, _ time.Duration, cut *cutter) (client, error) {
				db, err := k.open(ctx, cut)
				if err != nil {
					return nil, err
				}
				return k.forUpdate(ctx, db)
			}).from(a.module, "1 (its open transaction's)"),
			peer("distlock session", a.session, func(ctx context.Context, ttl time.Duration, cut *cutter) (client, error) {
				db, err := k.open(ctx, cut)
				if err != nil {
					return nil, err
				}
				d, err := k.driver(ctx, db, &sqllock.Options{Session: true, Table: sessionTable})
				if err != nil {
					k.close(db)
					return nil, err
				}
				return newSessionClient(d, ttl, func() { k.close(db) }), nil
			}).from("github.com/distlock/distlock", sessionConns),
		},
		Fenced: []Peer{
			fencedPeer("FOR UPDATE + counter", a.fencedForUpdate, func(ctx context.Context, _ time.Duration, cut *cutter) (client, error) {
				db, err := k.open(ctx, cut)
				if err != nil {
					return nil, err
				}
				fu, err := k.forUpdate(ctx, db)
				if err != nil {
					return nil, err
				}
				bump, err := k.fence(ctx, db)
				if err != nil {
					fu.Close()
					return nil, err
				}
				return &fencedClient{client: fu, bump: bump}, nil
			}),
			fencedPeer(a.lock+" + counter", a.fencedLock, func(ctx context.Context, _ time.Duration, cut *cutter) (client, error) {
				db, err := k.open(ctx, cut)
				if err != nil {
					return nil, err
				}
				bump, err := k.fence(ctx, db)
				if err != nil {
					k.close(db)
					return nil, err
				}
				return &fencedClient{client: k.lock(db), bump: bump}, nil
			}),
		},
		Conns: a.conns,
		Distlock: distlockPeer(a.distlock, func(ctx context.Context, _ time.Duration) (backend.Driver, func(), error) {
			db, err := k.open(ctx, nil)
			if err != nil {
				return nil, nil, err
			}
			d, err := k.driver(ctx, db, nil)
			if err != nil {
				k.close(db)
				return nil, nil, err
			}
			return d, func() { k.close(db) }, nil
		}),
		Floor: floor("SELECT 1", func() (func(context.Context) error, func(), error) {
			db, err := k.open(context.Background(), nil)
			if err != nil {
				return nil, nil, err
			}
			return func(ctx context.Context) error { return k.selectOne(ctx, db) }, func() { k.close(db) }, nil
		}),
		Info: func(ctx context.Context) (Info, error) {
			db, err := k.open(ctx, nil)
			if err != nil {
				return Info{}, err
			}
			defer k.close(db)
			return k.info(ctx, db)
		},
		Counters: func(ctx context.Context) (float64, float64, error) {
			db, err := k.open(ctx, nil)
			if err != nil {
				return 0, 0, err
			}
			defer k.close(db)
			return k.counters(ctx, db)
		},
	}
}

// settingsOf reads rows of a setting's name and value as Info.Settings
// lists them ("name value").
func settingsOf(rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}) ([]string, error) {
	var settings []string
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return settings, err
		}
		settings = append(settings, name+" "+value)
	}
	return settings, rows.Err()
}
