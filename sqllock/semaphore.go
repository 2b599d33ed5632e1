package sqllock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
)

// Counting semaphores (backend.Permits requests). A semaphore key has one row
// per permit slot in the slot table (<table>_sem: name, slot), slots
// 0, 1, ... created on demand. A grant of n permits is n slot rows locked
// FOR UPDATE in an open transaction on a pinned connection: the lock's
// own machinery (lock.go, conn.go, spare.go) holds, refreshes and releases
// it, so liveness, Close and the connection's lifecycle are the mutex's.
//
// One attempt (semOnce, one round trip when the connection batches):
//
//  1. SELECT slot ... WHERE name = K AND slot < limit ORDER BY slot
//     LIMIT n FOR UPDATE SKIP LOCKED: the free slots below the asker's
//     limit, never waiting for a holder. Fewer than n: nothing is kept
//     (ROLLBACK), and if some slots below the limit do not exist yet,
//     they are created (an autocommit INSERT on another connection) and
//     the attempt is made again.
//  2. then, a plain (non-locking) count of K's slot rows, total.
//
// Holding n free slots below the limit guarantees that the holds below
// the limit plus n are at most the limit, not that all holds are: an
// acquirer with a larger limit may hold slots at or above ours. When
// total <= limit there are no such slots (slot rows are created only
// below some acquirer's limit, as a prefix 0..R-1), so every hold is
// counted and the grant stands. When total > limit someone has used a
// larger limit, and the holds are counted (semHeld): on another
// connection, in a transaction rolled back at once, the slot rows that
// SELECT ... FOR UPDATE SKIP LOCKED can lock are the free ones, and
// total minus free are the held ones, ours included. A locking read skips
// rows locked by others without waiting, so nothing blocks; the count is
// read after the locking read, so a slot created meanwhile counts as
// held (a refusal too many, never a grant too many). While the probe runs
// it holds the free slots for an instant, so a concurrent try may find
// them taken and fail (acquirers who disagree on the limit only). If
// held > limit the grant is given back and the attempt fails.
//
// The fencing token comes from the key's counters as a lock's does, under
// a counter name of its own (semCounter), checked on the pinned session
// after the slots are locked.

// semDialect is what a dialect does for semaphores.
type semDialect interface {
	// semOnce opens a transaction on lc, locks up to n free slots of key
	// below limit, and counts key's slot rows (see above). MySQL also
	// moves the live counter of ck on (sr.lr.token).
	semOnce(ctx context.Context, lc *lockConn, key, ck, owner string, limit, n int) (semResult, error)
	// semHeld counts key's slots held by any session.
	semHeld(ctx context.Context, d *Driver, key string) (int, error)
	// semCreate returns the autocommit statement creating key's slots
	// from to to-1, which exist for no other session yet.
	semCreate(table, key string, from, to int) string
}

// semResult is the outcome of one semOnce.
type semResult struct {
	got   int // slots locked
	total int // key's slot rows
	below int // key's slot rows below the limit
	lr    lockResult
}

// semDia returns the Driver's semaphore dialect, or nil when it offers no
// semaphore (PostgreSQL's advisory mode: no tables to hold slots).
func (d *Driver) semDia() semDialect {
	if _, adv := d.dia.(pgAdvisory); adv {
		return nil
	}
	sd, _ := d.dia.(semDialect)
	return sd
}

// semCounter names the fencing counter of semaphore key (see nsName), so
// a lock and a semaphore of the same name count apart.
func semCounter(key string) string { return nsName("sem", key) }

// nsName names key in the namespace ns of the driver's own names: the key
// after a \x01 byte and ns, which no lock key has (keys have no control
// characters); a key too long for that is replaced by its SHA-256 in
// hexadecimal after a #, and so is a key already of that form (# and 64
// lowercase hexadecimal digits), which would otherwise name the same lock
// as the long key whose hash it spells.
func nsName(ns, key string) string {
	if len(key) < maxKeyLen-1-len(ns) && !hashForm(key) {
		return "\x01" + ns + key
	}
	h := sha256.Sum256([]byte(key))
	return "\x01" + ns + "#" + hex.EncodeToString(h[:])
}

// hashForm reports whether key is # and 64 lowercase hexadecimal digits,
// the tail of a hashed name (see nsName).
func hashForm(key string) bool {
	if len(key) != 1+2*sha256.Size || key[0] != '#' {
		return false
	}
	for i := 1; i < len(key); i++ {
		if c := key[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// tryPermits takes req.Permits free permit slots of the semaphore
// req.Key below req.Limit, all or none, without waiting (see the comment
// at the top of this file).
func (d *Driver) tryPermits(ctx context.Context, req backend.Request) (backend.Grant, error) {
	const op = "semaphore"
	sd := d.semDia()
	if sd == nil {
		return backend.Grant{}, fmt.Errorf("sqllock: %s %q: %w: no semaphore in advisory mode", op, req.Key, backend.ErrUnsupported)
	}
	if req.TTL > d.dia.maxTTL() {
		return backend.Grant{}, fmt.Errorf("sqllock: %s %q: %w: TTL %v is beyond the server's longest idle timeout (%v)",
			op, req.Key, backend.ErrInvalidConfig, req.TTL, d.dia.maxTTL())
	}
	if req.Limit < 1 || req.Limit > backend.MaxSemaphoreLimit || req.Permits < 1 || req.Permits > req.Limit {
		return backend.Grant{}, fmt.Errorf("sqllock: %s %q: %w: %d permits of %d", op, req.Key, backend.ErrInvalidConfig, req.Permits, req.Limit)
	}
	lc, err := d.pin(ctx, op, req.Key)
	if err != nil {
		return backend.Grant{}, err
	}
	ttl := seconds(req.TTL)
	lc.beginTTL, lc.beginLWT = ttl, false
	lc.begun = lc.sessTTL == ttl
	lc.begin = ""
	if !lc.begun {
		lc.begin = d.dia.begin(d.q, ttl, 0)
	}
	fail := func(err error) (backend.Grant, error) {
		lc.end(err)
		return backend.Grant{}, fmt.Errorf("sqllock: %s %q: %w", op, req.Key, d.classify(err))
	}
	if lc.batch, err = d.dia.batching(ctx, d, lc.c); err != nil {
		lc.discard()
		return backend.Grant{}, fmt.Errorf("sqllock: %s %q: %w", op, req.Key, d.classify(err))
	}
	ck := semCounter(req.Key)
	sr, sent, ok, err := d.takePermits(ctx, sd, lc, req, ck)
	if err != nil {
		return fail(err)
	}
	if !ok {
		return d.semRefused(ctx, lc, req.Key)
	}
	lc.id = sr.lr.id
	d.ids.put(lc.raw, lc.id)
	token, err := d.dia.token(ctx, lc, ck, req.Owner, sr.lr)
	if err != nil {
		lc.discard()
		return backend.Grant{}, fmt.Errorf("sqllock: %s %q: fencing token: %w", op, req.Key, d.classify(err))
	}
	// Valid from the send of the statement that took the permits, as a
	// mutex's grant (see acquireWith): the attempts before it were
	// rolled back and held nothing.
	return d.grant(lc, req, ttl, token, sent)
}

// takePermits takes req.Permits free slots of the semaphore req.Key (its
// live counter ck) in lc's transaction, all or none, creating the missing
// slots the grant needs, and returns the attempt's result and when the
// attempt that took the permits was sent; ok is false when the semaphore
// has no room for them (lc's transaction is then rolled back).
func (d *Driver) takePermits(ctx context.Context, sd semDialect, lc *lockConn, req backend.Request, ck string) (sr semResult, sent time.Time, ok bool, err error) {
	for attempt := 0; ; attempt++ {
		sent = time.Now()
		sr, err = sd.semOnce(ctx, lc, req.Key, ck, req.Owner, req.Limit, req.Permits)
		if err != nil {
			return sr, sent, false, err
		}
		if sr.got == req.Permits {
			break
		}
		if _, err := lc.c.ExecContext(ctx, d.q.rollback); err != nil {
			return sr, sent, false, err
		}
		if sr.below >= req.Limit || attempt == 2 {
			return sr, sent, false, nil
		}
		// Create the missing slots this grant needs (slots exist as a
		// prefix: those from below on do not exist yet).
		to := min(req.Limit, sr.below+req.Permits-sr.got)
		if err := d.semEnsure(ctx, sd, req.Key, sr.below, to); err != nil {
			return sr, sent, false, err
		}
	}
	if sr.total > req.Limit {
		held, err := sd.semHeld(ctx, d, req.Key)
		if err != nil {
			return sr, sent, false, err
		}
		if held > req.Limit {
			if _, err := lc.c.ExecContext(ctx, d.q.rollback); err != nil {
				return sr, sent, false, err
			}
			return sr, sent, false, nil
		}
	}
	return sr, sent, true, nil
}

// semRefused returns lc, whose transaction has been rolled back, and
// reports that the permits are not free.
func (d *Driver) semRefused(ctx context.Context, lc *lockConn, key string) (backend.Grant, error) {
	if err := lc.giveBack(ctx); err != nil {
		return backend.Grant{}, fmt.Errorf("sqllock: semaphore %q: %w", key, d.classify(err))
	}
	return backend.Grant{}, backend.NotAcquired(key, 0)
}

// semChunk is the most slots one statement creates.
const semChunk = 1000

// semEnsure creates key's slots from to to-1, semChunk per statement, each
// on a connection of its own and bounded as a NOWAIT lock's row creation
// is (ensureWait): it waits only when another session created the same
// slots meanwhile and has not committed yet.
func (d *Driver) semEnsure(ctx context.Context, sd semDialect, key string, from, to int) error {
	for ; from < to; from += semChunk {
		ictx, cancel := context.WithTimeout(ctx, ensureWait)
		err := d.insertStmt(ictx, sd.semCreate(d.q.table, key, from, min(to, from+semChunk)))
		cancel()
		switch {
		case err == nil, d.dia.createRace(err):
		case ctx.Err() == nil && errors.Is(ictx.Err(), context.DeadlineExceeded):
			return nil // created by another session: the next attempt sees them
		default:
			return err
		}
	}
	return nil
}
