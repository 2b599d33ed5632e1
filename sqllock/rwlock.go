package sqllock

import (
	"context"
	"fmt"

	"github.com/distlock/distlock/backend"
)

// Read-write locks (backend.Read and backend.Write requests, queued by backend.Waiter). A side of a
// read-write lock is a lock held by a transaction open on a pinned
// connection, exactly as the mutex's: the same lockConn, waiting loop,
// interruption of a canceled wait, spares, liveness by the session's idle
// timeout and Lock handle (acquire.go, lockread.go, kill.go, lock.go).
// Only the locking statement and the token differ, one file per dialect:
//
//   - MySQL/MariaDB (rwlock_mysql.go): the key's row in the lock table,
//     locked LOCK IN SHARE MODE by a reader and FOR UPDATE by a writer.
//     InnoDB queues a shared request behind a waiting exclusive one on
//     the same row, so a waiting writer keeps new readers out.
//   - PostgreSQL (rwlock_postgres.go, row and advisory modes):
//     pg_advisory_xact_lock_shared and pg_advisory_xact_lock on the
//     key's advisory hash (advisoryKey). Row locks would not do: a FOR
//     SHARE request is granted past a waiting FOR UPDATE, so readers
//     could starve a writer; the lock manager's advisory locks queue a
//     shared request behind a waiting exclusive one.
//
// The read-write lock of key is named nsName("rw", key) (its row, its
// advisory hash, its counter), so it never meets the mutex of the same
// key, as the semaphore's counter does not.
//
// Tokens: a write grant bumps the name's counter in the fence table by
// one, in an autocommit statement on another connection, committed
// (durable) before the grant is returned, and checks that the writer's
// session still holds the lock after that commit. The counter is the
// last write's token, durably: a read grant reads it in the transaction
// that holds the shared lock, after the lock is granted. There is no
// live counter for read-write locks (the mutex's cheaper scheme cannot
// tell a reader the last write's token after a restart emptied it); each
// write grant costs a durable commit. docs/sql.md ("Read-write locks")
// has the cases.
//
// Waits queue in the server (Capabilities.RW = queue): waitRW blocks in
// the locking statement, and a canceled wait is interrupted there (KILL
// QUERY, pg_cancel_backend), so nothing waits on. A writer leaves no
// waiting mark to withdraw: its queued request is the mark, and it ends
// with the wait.

// rwDialect is what a dialect does for read-write locks.
type rwDialect interface {
	// rwLock makes one attempt at the mode side of the read-write lock
	// named name in a new transaction on lc, as lockOnce does for the
	// mutex; a Read attempt that is granted also reads the last write's
	// token (lr.token) after the grant, in the same round trip when the
	// connection batches.
	rwLock(ctx context.Context, lc *lockConn, name string, mode backend.Kind, nowait bool) (lockResult, error)
	// rwWriteToken returns a write grant's token: name's counter bumped
	// and committed on another connection, after which lc's session is
	// checked to hold the lock still.
	rwWriteToken(ctx context.Context, lc *lockConn, name, owner string, lr lockResult) (uint64, error)
}

// rwName names key's read-write lock (see nsName).
func rwName(key string) string { return nsName("rw", key) }

// tryRW makes one attempt at the mode side of req.Key's read-write
// lock, with NOWAIT (or the advisory lock's try): it fails if the side
// is held elsewhere, or, for Read, if a writer waits for the lock.
// waiting is not used: a waiting writer's queued request in the server
// is what keeps new readers out.
func (d *Driver) tryRW(ctx context.Context, req backend.Request, mode backend.Kind, _ bool) (backend.Grant, error) {
	return d.acquireRW(ctx, req, mode, false)
}

// waitRW waits for the mode side of req.Key's read-write lock in the
// server's queue, as Wait does for the mutex; when ctx ends the blocked
// statement is interrupted, so no request stays queued.
func (d *Driver) waitRW(ctx context.Context, req backend.Request, mode backend.Kind) (backend.Grant, error) {
	return d.acquireRW(ctx, req, mode, true)
}

func (d *Driver) acquireRW(ctx context.Context, req backend.Request, mode backend.Kind, wait bool) (backend.Grant, error) {
	rd, ok := d.dia.(rwDialect)
	if !ok {
		return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: %w: no read-write locks on %s", req.Key, backend.ErrUnsupported, d.dia.name())
	}
	token := readToken
	switch mode {
	case backend.Read:
	case backend.Write:
		token = rd.rwWriteToken
	default:
		return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: %w: rw mode %v", req.Key, backend.ErrInvalidConfig, mode)
	}
	lock := func(ctx context.Context, lc *lockConn, name, _ string, nowait bool) (lockResult, error) {
		return rd.rwLock(ctx, lc, name, mode, nowait)
	}
	return d.acquireWith(ctx, req, rwName(req.Key), wait, lock, token)
}

// readToken is a read grant's token: the last write's, read by the
// locking attempt.
func readToken(_ context.Context, _ *lockConn, _, _ string, lr lockResult) (uint64, error) {
	return lr.token, nil
}
