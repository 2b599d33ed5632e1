package memlock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
)

var _ backend.Announcer = (*Driver)(nil)

// SetValue implements backend.Announcer: the value is kept in the key's
// entry, set only while the entry is held under the lock's owner and
// token, and cleared when the holder changes.
func (d *Driver) SetValue(ctx context.Context, l backend.Lock, value string) error {
	ml, ok := l.(*lock)
	if !ok || ml.d != d {
		return fmt.Errorf("memlock: set value: %w: the lock (%T) was not granted by this driver", backend.ErrUnsupported, l)
	}
	if ml.permits > 0 {
		return backend.UnsupportedKind("memlock", "set value", backend.Permits)
	}
	if err := d.enter(ctx, "set value"); err != nil {
		return err
	}
	defer d.s.mu.Unlock()
	e := ml.mine(time.Now())
	if e == nil {
		return fmt.Errorf("memlock: set value %q: %w", ml.key, backend.ErrNotHeld)
	}
	if e.value != value {
		e.value = value
		e.announce()
	}
	return nil
}

// Watch implements backend.Announcer. An expiry is announced only when
// something reads the key after it (the portable layer reads it again
// when the holder's TTL runs out); every other change at once. The
// channel is closed when the driver is killed or closed.
func (d *Driver) Watch(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return d.listen(ctx, "watch", key, true)
}

// announce tells e's watchers that its holder or value changed. The
// store's mutex is held.
func (e *entry) announce() {
	for sub := range e.watches {
		select {
		case sub.ch <- struct{}{}:
		default:
		}
	}
}
