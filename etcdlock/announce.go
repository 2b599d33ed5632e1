package etcdlock

import (
	"context"
	"fmt"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/ownerval"
)

var _ backend.Announcer = (*Driver)(nil)

// SetValue implements backend.Announcer, as etcd's own
// concurrency.Election.Proclaim does: one transaction puts the value into
// the lock's key if the key still exists with its create revision (so it
// is still this hold's, at the head of the line: no key made later can
// come before it), keeping its lease. The create revision, the token, is
// unchanged by a put. The value follows the owner in the key's value
// (internal/ownerval).
func (d *Driver) SetValue(ctx context.Context, l backend.Lock, value string) error {
	el, ok := l.(*lock)
	if !ok || el.d != d {
		return fmt.Errorf("etcdlock: set value: %w: the lock (%T) was not granted by this driver", backend.ErrUnsupported, l)
	}
	if !strings.HasPrefix(el.ekey, lockRange(d.prefix, el.key)) { // a read-write lock's side
		return fmt.Errorf("etcdlock: set value %q: %w: values are kept for the mutex only", el.key, backend.ErrUnsupported)
	}
	resp, err := d.c.Txn(ctx).If(el.owns()).
		Then(clientv3.OpPut(el.ekey, string(ownerval.Join(el.owner, value)), clientv3.WithIgnoreLease())).Commit()
	if err != nil {
		return d.wrap(ctx, "set value", el.key, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("etcdlock: set value %q: %w: key %s with create revision %d is gone", el.key, backend.ErrNotHeld, el.ekey, el.rev)
	}
	return nil
}

// Watch implements backend.Announcer: an etcd watch of the lock's range,
// confirmed by etcd (WithCreatedNotify) before Watch returns, announces
// every put and deletion in it: a holder's value, a grant (its key put,
// or the deletion that moves the head of the line), a release, a lease
// expiring (its keys deleted), a waiter joining or leaving. The watch
// requires a leader: when the member it runs on loses its leader, or the
// watch fails, the channel is closed (the caller polls and watches again);
// also when the driver closes.
func (d *Driver) Watch(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	wctx, cancelWatch := context.WithCancel(clientv3.WithRequireLeader(d.ctx))
	cancel := sync.OnceFunc(cancelWatch)
	wch := d.c.Watch(wctx, lockRange(d.prefix, key), clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	select {
	case resp, ok := <-wch:
		if !ok || resp.Err() != nil || !resp.Created {
			cancel()
			err := fmt.Errorf("watch ended before it was created")
			if ok && resp.Err() != nil {
				err = resp.Err()
			}
			return nil, nil, d.wrap(ctx, "watch", key, err)
		}
	case <-ctx.Done():
		cancel()
		return nil, nil, fmt.Errorf("etcdlock: watch %q: %w", key, context.Cause(ctx))
	}
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		for resp := range wch {
			if resp.Err() != nil || resp.Canceled {
				cancel() // wch closes
				continue
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out, cancel, nil
}
