package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/distlock/distlock/backend"
)

// inspectMutex reports key's state: whether a session holds the row lock (found
// with a NOWAIT probe in a short transaction of its own, which can make a
// concurrent TryAcquire fail for the probe's millisecond), and the last
// holder's owner and fencing token (MySQL: from the live counter table;
// when the key has no live counter, not locked since the server restarted
// or evicted, the owner and token are not known, "" and 0. PostgreSQL:
// from the fencing counter table). The remaining TTL and the number of
// waiters are not known (0 and -1).
func (d *Driver) inspectMutex(ctx context.Context, key string) (backend.Info, error) {
	info := backend.Info{Key: key, Waiters: -1}
	g, err := d.dia.lastGrant(ctx, d, key)
	if err != nil {
		return info, fmt.Errorf("sqllock: inspect %q: %w", key, d.classify(err))
	}
	if !g.exists {
		return info, nil // never locked
	}
	info.Token = g.token
	held, err := d.probe(ctx, key)
	if err != nil {
		return info, fmt.Errorf("sqllock: inspect %q: %w", key, d.classify(err))
	}
	if held {
		info.Held, info.Owner = true, string(g.owner)
	}
	return info, nil
}

// prober is a dialect whose locks are not row locks.
type prober interface {
	probe(ctx context.Context, d *Driver, key string) (bool, error)
}

// probe reports whether another session holds key's row lock.
func (d *Driver) probe(ctx context.Context, key string) (bool, error) {
	if p, ok := d.dia.(prober); ok {
		return p.probe(ctx, d, key)
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }()
	var name []byte
	err = tx.QueryRowContext(ctx, d.bind(d.q.probe, key)).Scan(&name)
	switch {
	case err == nil, errors.Is(err, sql.ErrNoRows):
		return false, nil
	case d.dia.conflict(err):
		return true, nil
	default:
		return false, err
	}
}

// List implements backend.Inspector: it answers ErrUnsupported. A lock's
// row stays after its release and a held lock is known only by a probe of
// its row lock, so the store cannot name the locks held now.
func (d *Driver) List(context.Context, string, int) ([]backend.Info, error) {
	return nil, fmt.Errorf("sqllock: list: %w: the store cannot enumerate its held locks", backend.ErrUnsupported)
}
