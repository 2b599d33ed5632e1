package sqllock

import (
	"context"
	"fmt"

	"github.com/distlock/distlock/backend"
)

// ForceRelease implements backend.Inspector: the session the last grant of
// key went to (recorded with its token) is ended from another connection
// (MySQL KILL CONNECTION, PostgreSQL pg_terminate_backend; the user needs
// the right to end that session: the same user, or CONNECTION_ADMIN /
// pg_signal_backend), which rolls its transaction back and so frees the
// row lock or advisory lock, and every other lock that session held. The
// next grant starts a new fencing epoch, above every earlier token. The
// freed holder's next Refresh finds its connection ended. The store keeps
// no record of the force (the lock tables have no column for it): the
// Locker's log line is the record.
//
// The holder is read, then probed, then ended, in three steps: a holder
// that released in between and was followed by another at once may have
// its successor's session ended instead, which is a second forced free,
// never a second holder.
func (d *Driver) ForceRelease(ctx context.Context, key string, f backend.Forced) (backend.Info, error) {
	info := backend.Info{Key: key, Waiters: -1}
	if d.sess != nil {
		return info, fmt.Errorf("sqllock: force release %q: %w in session mode: the holder's lock lives on a session its other leases share, which only that session can unlock; ending it would free them all (use row or advisory mode to free locks by hand)", key, backend.ErrUnsupported)
	}
	g, err := d.dia.lastGrant(ctx, d, key)
	if err != nil {
		return info, fmt.Errorf("sqllock: force release %q: %w", key, d.classify(err))
	}
	held := false
	if g.exists {
		if held, err = d.probe(ctx, key); err != nil {
			return info, fmt.Errorf("sqllock: force release %q: %w", key, d.classify(err))
		}
	}
	if !held {
		return info, fmt.Errorf("sqllock: force release %q: %w: the lock is free", key, backend.ErrNotHeld)
	}
	if !g.known || g.holder == 0 {
		return info, fmt.Errorf("sqllock: force release %q: %w: the store has no record of the holder's session (its live counter was evicted or lost in a restart)", key, backend.ErrUnsupported)
	}
	ended, err := d.dia.terminate(ctx, d, g.holder)
	if err != nil {
		return info, fmt.Errorf("sqllock: force release %q: ending session %d: %w", key, g.holder, d.classify(err))
	}
	if !ended {
		return info, fmt.Errorf("sqllock: force release %q: %w: the holder's session %d ended meanwhile", key, backend.ErrNotHeld, g.holder)
	}
	info.Held, info.Owner, info.Token = true, string(g.owner), g.token
	return info, nil
}
