package zklock

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
)

// inspectPermits is Inspect for a semaphore with two round
// trips: one read of the semaphore's children, whose names are its queue
// (semaphore.go: permits and limit in each name, so the holders are known
// from the names alone), then one pipelined read of each holder's node for
// its owner (the node's data) and token (its czxid, as its grant's). The
// nodes that do not hold are the waiters. TTL is the driver's session
// timeout, as Inspect reports it (ZooKeeper does not tell how long
// another client's session has left). A holder that leaves between the
// two reads makes it look again (three times at most; then the holders
// still there are reported).
func (d *Driver) inspectPermits(ctx context.Context, key string) (backend.Info, error) {
	const op = "inspect semaphore"
	parent := d.semParent(key)
	return lookAgain(func() (info backend.Info, gone bool, err error) {
		info = backend.Info{Key: key}
		children, err := d.childrenOf(ctx, op, key, parent)
		if err != nil {
			return info, false, err
		}
		q := semQueueOf(children)
		n := holding(q)
		info.Waiters = len(q) - n
		paths := make([]string, n)
		for i, e := range q[:n] {
			paths[i] = parent + "/" + e.name
		}
		res, err := d.getAll(ctx, paths)
		if err != nil {
			return info, false, failure(op, key, err)
		}
		gone, err = found(op, key, res, func(i int, r getResult) {
			info.Permits += q[i].permits
			info.Holders = append(info.Holders, backend.Holder{Owner: string(r.data), Permits: q[i].permits,
				Token: uint64(r.stat.Czxid), TTL: d.timeout()})
		})
		info.Held = info.Permits > 0
		return info, gone, err // in queue order, which is czxid (token) order
	})
}

// inspectRW is Inspect for a read-write lock with two round trips: one read
// of the lock's children (rwlock.go: a node's side is in its guid), then
// one pipelined read of each holder's node (owner: its data) and, for
// readers, of the fence node. The lowest node holds if it is a writer's,
// with its czxid as token; else the readers below the lowest writer hold,
// with the last write's token from the fence node, as their grants read
// it. Every other node waits. TTL and a holder that leaves meanwhile are
// as for inspectPermits.
func (d *Driver) inspectRW(ctx context.Context, key string) (backend.Info, error) {
	const op = "inspect rw lock"
	parent := d.rwParent(key)
	return lookAgain(func() (info backend.Info, gone bool, err error) {
		info = backend.Info{Key: key}
		children, err := d.childrenOf(ctx, op, key, parent)
		if err != nil {
			return info, false, err
		}
		q := queueOf(children)
		var paths []string
		writer := len(q) > 0 && isWriter(q[0].name)
		if writer {
			paths = []string{parent + "/" + q[0].name}
		} else {
			for _, e := range q {
				if isWriter(e.name) {
					break
				}
				paths = append(paths, parent+"/"+e.name)
			}
		}
		info.Waiters = len(q) - len(paths)
		holders := len(paths)
		if !writer && holders > 0 {
			paths = append(paths, d.rwFence(key))
		}
		res, err := d.getAll(ctx, paths)
		if err != nil {
			return info, false, failure(op, key, err)
		}
		var fence uint64
		if !writer && holders > 0 {
			f := res[holders]
			if fence, err = parseFence(d.rwFence(key), f.data, f.err); err != nil {
				return info, false, failure(op, key, err)
			}
		}
		gone, err = found(op, key, res[:holders], func(_ int, r getResult) {
			h := backend.Holder{Owner: string(r.data), Token: fence, TTL: d.timeout()}
			switch {
			case writer:
				h.Token = uint64(r.stat.Czxid)
				info.Held, info.Owner, info.Token, info.TTL = true, h.Owner, h.Token, h.TTL
			case !slices.ContainsFunc(info.Holders, func(o backend.Holder) bool { return o.Owner == h.Owner }):
				info.Held, info.Holders = true, append(info.Holders, h) // one per owner
			}
		})
		slices.SortFunc(info.Holders, func(a, b backend.Holder) int { return cmp.Compare(a.Owner, b.Owner) })
		return info, gone, err
	})
}

// lookAgain is the retry of inspectPermits and inspectRW: it calls look
// again while look reports a holder gone between its two reads, three
// times at most; then the holders still there are reported.
func lookAgain(look func() (info backend.Info, gone bool, err error)) (backend.Info, error) {
	for attempt := 0; ; attempt++ {
		info, gone, err := look()
		if err != nil || !gone || attempt == 2 {
			return info, err
		}
	}
}

// found calls each for every read of res that found its node, and reports
// whether a node was gone (zk.ErrNoNode: its holder left after the
// children were read). A read that failed otherwise is op's error.
func found(op, key string, res []getResult, each func(i int, r getResult)) (gone bool, err error) {
	for i, r := range res {
		switch {
		case errors.Is(r.err, zk.ErrNoNode):
			gone = true
		case r.err != nil:
			return gone, failure(op, key, r.err)
		default:
			each(i, r)
		}
	}
	return gone, nil
}

// childrenOf reads parent's children: none when parent does not exist.
func (d *Driver) childrenOf(ctx context.Context, op, key, parent string) ([]string, error) {
	var children []string
	var zerr error
	if err := d.do(ctx, func() { children, _, zerr = d.conn.Children(parent) }); err != nil {
		return nil, failure(op, key, err)
	}
	switch {
	case errors.Is(zerr, zk.ErrNoNode):
		return nil, nil
	case zerr != nil:
		return nil, failure(op, key, zerr)
	}
	return children, nil
}

// getResult is one node's read by getAll.
type getResult struct {
	data []byte
	stat *zk.Stat
	err  error
}

// getAll reads the nodes at paths, all requests pipelined (one round
// trip); each result carries its own error (zk.ErrNoNode for a node gone).
func (d *Driver) getAll(ctx context.Context, paths []string) ([]getResult, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	res := make([]getResult, len(paths))
	err := d.do(ctx, func() {
		var wg sync.WaitGroup
		for i, p := range paths {
			wg.Go(func() { res[i].data, res[i].stat, res[i].err = d.conn.Get(p) })
		}
		wg.Wait()
	})
	if err != nil {
		return nil, err // res may still be written: not read
	}
	return res, nil
}
