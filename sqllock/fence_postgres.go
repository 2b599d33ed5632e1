package sqllock

import (
	"context"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/stdlib"
)

// PostgreSQL's fencing tokens: an UNLOGGED live counter per key over its
// durable epoch, moved on by one statement on another connection (token),
// and the last grant read back (lastGrant).

// pgSeqBits is the width of the sequence part of a PostgreSQL fencing
// token: a token is epoch<<pgSeqBits | seq, the epoch a durable per-key
// counter (the fence table's token column holds epoch<<pgSeqBits), seq the
// grants within the epoch, counted in the UNLOGGED live table (see token).
const (
	pgSeqBits = 32
	pgSeqMask = 1<<pgSeqBits - 1
)

// pgFence is the token statement (see token) on the fence table ft and
// the live table vt: the live counter's increment, or, when the key has
// no live counter or it is at the end of its epoch, a new durable epoch
// and the live counter set to its first token, in the same transaction.
// txid_status, volatile, is evaluated on the row the increment or the
// upsert returns, so after the live row is locked. The one statement with
// parameters: its text is the same for every key.
//
// s makes the commit of a new epoch wait for its WAL flush even when
// the session's synchronous_commit is off (set for the server, the
// database or the role): an asynchronous commit returns before the
// flush, and a crash then could lose the epoch after its tokens
// were handed out, and mint it again. It is read only where an
// epoch is written (e); the steady state writes no WAL, which makes
// its commit wait for none whatever the setting.
func pgFence(ft, vt string) string {
	return fmt.Sprintf("WITH s AS (SELECT set_config('synchronous_commit', 'on', true)), "+
		"u AS (UPDATE %[2]s AS l SET token = l.token + 1, owner = $2::bytea, holder_id = $3::bigint, granted_at = now() "+
		"WHERE l.name = $1::bytea AND l.token & %[3]d <> %[3]d RETURNING l.token), "+
		"e AS (INSERT INTO %[1]s AS f (name, token, owner, holder_id, granted_at) "+
		"SELECT $1::bytea, %[4]d, $2::bytea, $3::bigint, now() FROM s WHERE NOT EXISTS (SELECT FROM u) "+
		"ON CONFLICT (name) DO UPDATE SET token = ((f.token >> %[5]d) + 1) << %[5]d, owner = EXCLUDED.owner, holder_id = EXCLUDED.holder_id, granted_at = EXCLUDED.granted_at "+
		"RETURNING f.token), "+
		"n AS (INSERT INTO %[2]s AS l (name, token, owner, holder_id, granted_at) "+
		"SELECT $1::bytea, e.token | 1, $2::bytea, $3::bigint, now() FROM e "+
		"ON CONFLICT (name) DO UPDATE SET token = GREATEST(l.token + 1, EXCLUDED.token), owner = EXCLUDED.owner, holder_id = EXCLUDED.holder_id, granted_at = EXCLUDED.granted_at "+
		"RETURNING l.token) "+
		"SELECT token, txid_status($4::bigint) FROM u UNION ALL SELECT token, txid_status($4::bigint) FROM n",
		ft, vt, uint64(pgSeqMask), uint64(1)<<pgSeqBits, pgSeqBits)
}

// errLostBeforeToken: the lock's transaction ended before its fencing
// token was committed; the token is burnt (never handed out), which is
// harmless.
var errLostBeforeToken = errors.New("sqllock: the lock's session ended before its fencing token was issued")

// token returns the grant's fencing token, from one statement on another
// connection (autocommit) that also checks, after it has locked the key's
// live counter row, that the lock's transaction is still in progress. A
// next holder can lock the key only after that transaction ends, and its
// own statement waits for this one's commit, so tokens follow the order of
// the holds.
//
// A token is epoch<<pgSeqBits | seq. In steady state the statement only
// increments the key's row in the UNLOGGED live table: no WAL, so its
// commit does not wait for a WAL flush. When the key has no live row (first
// use; or crash recovery, which empties unlogged tables; or the row was
// deleted) or its seq is at the end of the epoch, the same statement bumps
// the key's durable epoch in the fence table and sets the live row to the
// new epoch's first token, in one transaction: it wrote WAL, so its commit
// is flushed before the token is returned. Every token handed out belongs
// to an epoch committed before it, so a new epoch is above all of them.
// docs/sql.md ("PostgreSQL's fencing tokens") has the whole argument.
//
// It runs between the grant and the caller's critical section, so under
// contention it is on every hand-off's path: unlike the driver's other
// statements it goes with parameters through pgx's query execution, in the
// connection's own mode. With pgx's default (QueryExecModeCacheStatement)
// it is parsed and planned once per connection and then sent as Bind and
// Execute, one round trip, not parsed and planned again on every
// acquisition; its text does not depend on the key, so one cached
// statement serves all keys. A pool configured for the simple protocol
// (PgBouncer in transaction mode) gets it as one simple query.
func (pgDialect) token(ctx context.Context, lc *lockConn, key, owner string, lr lockResult) (uint64, error) {
	return pgToken(ctx, lc, lc.d.q.fence, key, owner, lr)
}

// tokenAttempts bounds how often the token statement starts again after
// a serialization failure (see pgToken).
const tokenAttempts = 10

// pgToken runs the token statement q with the parameters key, owner, the
// session's id and its transaction's id, on another connection, and
// returns the token it committed if the statement saw the lock's
// transaction in progress. A serialization failure (a session default of
// repeatable read or serializable, and the counter row updated by another
// transaction meanwhile) rolled the statement back whole: it is sent
// again, up to tokenAttempts times.
func pgToken(ctx context.Context, lc *lockConn, q, key, owner string, lr lockResult) (uint64, error) {
	c, err := lc.d.conn(ctx)
	if err != nil {
		return 0, err
	}
	var tok int64
	var status string
	err = c.Raw(func(dc any) error {
		sc, ok := driverConn(dc).(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("sqllock: postgres: %T is not a connection of github.com/jackc/pgx/v5/stdlib", dc)
		}
		for attempt := 1; ; attempt++ {
			err := sc.Conn().QueryRow(ctx, q, []byte(key), []byte(owner), int64(lc.id), int64(lr.xid)).Scan(&tok, &status)
			if pgCode(err) != pgSerialization || attempt == tokenAttempts || ctx.Err() != nil {
				return err
			}
			// The session's default isolation is repeatable read or
			// serializable, and another transaction updated the counter
			// row since the statement's snapshot: it was rolled back whole
			// (nothing counted), and starts again with a new snapshot.
		}
	})
	if err != nil && lc.d.connGone(err) {
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = c.Close()
	if err != nil {
		return 0, err
	}
	if status != "in progress" {
		return 0, errLostBeforeToken
	}
	if tok <= 0 {
		return 0, fmt.Errorf("sqllock: fencing counter returned %d", tok)
	}
	return uint64(tok), nil
}

// lastGrant reads the key's live counter and, in the same round trip,
// whether it has a durable epoch (to tell "never locked" from "not known":
// crash recovery empties the live table).
func (pgDialect) lastGrant(ctx context.Context, d *Driver, key string) (lastGrant, error) {
	var g lastGrant
	res, err := pgExecDB(ctx, d, bindPG(d.q.fenceRow, key, key))
	if err != nil {
		return g, err
	}
	if len(res) != 2 {
		return g, fmt.Errorf("sqllock: reading the last grant returned %d results", len(res))
	}
	if len(res[0].Rows) == 0 {
		g.exists = len(res[1].Rows) != 0
		return g, nil // never locked, or the live counter is gone: not known
	}
	row := res[0].Rows[0]
	g.exists, g.known = true, true
	g.owner = append([]byte(nil), row[1]...)
	// bytea in text format: \x followed by hex digits.
	if o := string(row[1]); strings.HasPrefix(o, `\x`) {
		if b, err := hex.DecodeString(o[2:]); err == nil {
			g.owner = b
		}
	}
	if len(row) > 2 {
		g.holder, _ = strconv.ParseUint(string(row[2]), 10, 64)
	}
	g.token, err = strconv.ParseUint(string(row[0]), 10, 64)
	return g, err
}
