package etcdlock

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The etcd client multiplexes watches with the same metadata on one gRPC
// stream, and closes the stream when its last watch ends. A driver that
// waits for one lock at a time would then open a new stream (and the
// server two goroutines) for every wait. The idle watch is one watch on a
// key no lock uses, held open for the driver's life, so waits only add and
// remove watches on a stream that stays up.

// idleWatchKey is never written: lock ranges need a non-empty key.
func (d *Driver) idleWatchKey() string { return d.prefix + "%/" }

// startIdleWatch starts the idle watch once, on the first wait.
func (d *Driver) startIdleWatch() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.idleWatching || d.closed {
		return
	}
	d.idleWatching = true
	d.wg.Go(d.keepIdleWatch)
}

// keepIdleWatch keeps the idle watch open until the driver closes, opening it
// again (after a pause) when the server ends it, e.g. on a leader change.
func (d *Driver) keepIdleWatch() {
	for d.ctx.Err() == nil && d.c.Ctx().Err() == nil {
		wch := d.c.Watch(clientv3.WithRequireLeader(d.ctx), d.idleWatchKey())
		for range wch {
		}
		t := time.NewTimer(time.Second)
		select {
		case <-t.C:
		case <-d.ctx.Done():
			t.Stop()
		}
	}
}
