package memlock

import (
	"context"
	"time"
)

type subscription struct {
	key   string
	ch    chan struct{}
	watch bool // a Watch (announce.go), not a Subscribe
}

// subscribeMutex is Subscribe for the mutex.
func (d *Driver) subscribeMutex(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return d.listen(ctx, "subscribe", key, false)
}

// listen registers a listener on key's mutex entry: a Subscribe
// (releases) or, with watch, a Watch (announce.go: holder and value
// changes). The channel is closed when the driver is killed or closed.
func (d *Driver) listen(ctx context.Context, op, key string, watch bool) (<-chan struct{}, func(), error) {
	if err := d.enter(ctx, op); err != nil {
		return nil, nil, err
	}
	defer d.s.mu.Unlock()
	sub := &subscription{key: key, ch: make(chan struct{}, 1), watch: watch}
	e := d.s.lookup(key, time.Now(), true)
	if watch {
		e.watches[sub] = struct{}{}
	} else {
		e.subs[sub] = struct{}{}
	}
	d.mu.Lock()
	d.subs[sub] = struct{}{}
	d.mu.Unlock()
	cancel := func() {
		d.s.mu.Lock()
		defer d.s.mu.Unlock()
		d.mu.Lock()
		defer d.mu.Unlock()
		if _, ok := d.subs[sub]; ok {
			delete(d.subs, sub)
			d.s.unsubscribeLocked(sub)
		}
	}
	return sub.ch, cancel, nil
}

func (s *Store) unsubscribeLocked(sub *subscription) {
	if e := s.locks[sub.key]; e != nil {
		delete(e.subs, sub)
		delete(e.watches, sub)
		s.gc(e)
	}
}
