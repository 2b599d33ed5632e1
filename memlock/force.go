package memlock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
)

// ForceRelease implements backend.Inspector: key's mutex is freed whatever its
// holds (the next waiter, if any, is granted it with the next token), and
// f is kept as the key's record until the next force.
func (d *Driver) ForceRelease(ctx context.Context, key string, f backend.Forced) (backend.Info, error) {
	if err := d.enter(ctx, "force release"); err != nil {
		return backend.Info{}, err
	}
	defer d.s.mu.Unlock()
	now := time.Now()
	e := d.s.lookup(key, now, false)
	if e == nil || !e.held(now) {
		return backend.Info{Key: key, Waiters: -1}, fmt.Errorf("memlock: force release %q: %w: the lock is free", key, backend.ErrNotHeld)
	}
	info := d.infoLocked(e, now)
	f.Owner, f.Token = e.owner, e.token
	if d.s.forced == nil {
		d.s.forced = map[string]backend.Forced{}
	}
	d.s.forced[key] = f
	d.s.freeLocked(e, now)
	return info, nil
}

// forcedLocked returns key's last forced release, or nil; s.mu is held.
func (s *Store) forcedLocked(key string) *backend.Forced {
	if f, ok := s.forced[key]; ok {
		return &f
	}
	return nil
}
