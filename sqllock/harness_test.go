package sqllock_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/sqllock"
)

const testTable = "distlock_test_locks"

// testAdvisoryTable is the PostgreSQL tests' lock table in advisory mode
// (a table records the one mode it is used in).
const testAdvisoryTable = "distlock_test_adv"

// testSessionTable is the tests' lock table in session mode.
const testSessionTable = "distlock_test_sess"

// client is one Driver's store client, whose connections go through a
// proxy of its own (nil for clients that need no faults).
type client struct {
	db *sql.DB
	p  *proxy
	// closeUser closes a user-made client that is not db (a pgx pool);
	// nil: closing db closes the client.
	closeUser func()
}

// kill cuts every connection at once and refuses new ones: no rollback, no
// quit message, the server sees the connections end as for a process that
// died (with an RST).
func (c *client) kill() error {
	c.p.Refuse(true)
	c.p.Reset()
	if c.db != nil {
		_ = c.db.Close() // reports the connections just cut
	}
	return nil
}

// close closes the client's store client and its proxy.
func (c *client) close() {
	_ = c.p.Close()
	if c.closeUser != nil {
		c.closeUser()
	} else {
		_ = c.db.Close()
	}
}

// harness implements conformance.Harness, Partitioner, ReplyDropper,
// ServerControl, Killer, Deleter and UserClients for a dialect row over
// its shared server: every Driver over a pool of its own behind a proxy
// to the server, the faults made through the proxies.
type harness struct {
	s       *server
	d       *dialect
	ttl     time.Duration
	mu      sync.Mutex
	clients map[backend.Driver]*client
}

// nativeHarness is a harness whose dialect knows its client's errors.
type nativeHarness struct{ *harness }

func (h nativeHarness) NativeError(err error) bool { return h.d.nativeError(err) }

var (
	_ conformance.UserClients  = (*harness)(nil)
	_ conformance.NativeErrors = nativeHarness{}
)

func newHarness(d *dialect, s *server, ttl time.Duration) *harness {
	return &harness{s: s, d: d, ttl: ttl, clients: map[backend.Driver]*client{}}
}

// conformanceHarness is newHarness as the suite takes it: with
// NativeErrors when the dialect has it.
func conformanceHarness(d *dialect, s *server, ttl time.Duration) conformance.Harness {
	h := newHarness(d, s, ttl)
	if d.nativeError != nil {
		return nativeHarness{h}
	}
	return h
}

// NewDriver makes a Driver of the row over newDB's pool, which dials
// through a new proxy to the server.
func (h *harness) NewDriver(ctx context.Context) (backend.Driver, error) {
	p, err := startProxy(h.s.addr)
	if err != nil {
		return nil, err
	}
	c := &client{db: h.s.newDB(p.Addr, h.d.m.batch), p: p}
	opts := h.d.options(sqllock.Options{})
	d, err := sqllock.New(ctx, c.db, &opts)
	if err != nil {
		_ = c.db.Close()
		_ = p.Close()
		return nil, err
	}
	h.add(d, c)
	return d, nil
}

// NewUserDriver makes a Driver as a service does (the dialect's
// newUserClient), with nil Options but the row's table and mode, dialing
// through a proxy of its own for the faults. The client is closed with
// the harness, after the case closed the Driver.
func (h *harness) NewUserDriver(ctx context.Context) (backend.Driver, error) {
	p, err := startProxy(h.s.addr)
	if err != nil {
		return nil, err
	}
	opts := &sqllock.Options{Table: h.d.table(), Advisory: h.d.opts.Advisory, Session: h.d.opts.Session}
	d, db, closeUser, err := h.d.newUserClient(ctx, p.Addr(), opts)
	if err != nil {
		_ = p.Close()
		return nil, err
	}
	c := &client{db: db, p: p}
	if db == nil {
		c.closeUser = closeUser
	}
	h.add(d, c)
	return d, nil
}

// Delete ends the holder's session from an admin connection.
func (h *harness) Delete(ctx context.Context, key string) error {
	if h.d.opts.Session {
		// Session mode: the holder's session unlocks the key (as
		// pg_advisory_unlock_all, or a statement of the holder's own on
		// it, would: a MySQL named lock can be released by its session
		// only); killing the session would end its other leases too.
		h.mu.Lock()
		var ds []*sqllock.Driver
		for d := range h.clients {
			if sd, ok := d.(*sqllock.Driver); ok {
				ds = append(ds, sd)
			}
		}
		h.mu.Unlock()
		for _, d := range ds {
			if ok, err := sqllock.UnlockBehind(ctx, d, key); ok || err != nil {
				return err
			}
		}
		return fmt.Errorf("delete %q: no session of the harness's drivers holds it", key)
	}
	return h.d.killHolder(ctx, h.s, key)
}

// add records d's client, for the fault hooks and Close.
func (h *harness) add(d backend.Driver, c *client) {
	h.mu.Lock()
	h.clients[d] = c
	h.mu.Unlock()
}

// onProxy runs f on d's proxy, or returns client's error.
func (h *harness) onProxy(d backend.Driver, f func(*proxy)) error {
	c, err := h.client(d)
	if err != nil {
		return err
	}
	f(c.p)
	return nil
}

func (h *harness) client(d backend.Driver) (*client, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.clients[d]
	if c == nil {
		return nil, fmt.Errorf("unknown driver %T", d)
	}
	return c, nil
}

// Partition black-holes d's connections, current and new.
func (h *harness) Partition(_ context.Context, d backend.Driver) error {
	return h.onProxy(d, blackhole)
}

func (h *harness) Heal(_ context.Context, d backend.Driver) error {
	return h.onProxy(d, func(p *proxy) { p.Heal() })
}

// DropNextReply loses the reply to d's next command (isCommand), not to a
// connection's handshake. The connection then closes, which ends whatever
// it held.
func (h *harness) DropNextReply(_ context.Context, d backend.Driver) error {
	return h.onProxy(d, func(p *proxy) { p.DropReply(h.d.isCommand, nil) })
}

func (h *harness) Dropped(d backend.Driver) int {
	c, err := h.client(d)
	if err != nil {
		return 0
	}
	return c.p.Dropped()
}

func (h *harness) TTL() time.Duration { return h.ttl }

// Kill resets every connection of d through its proxy and refuses new
// ones: no rollback, no quit message, as for a process that died.
func (h *harness) Kill(_ context.Context, d backend.Driver) error {
	c, err := h.client(d)
	if err != nil {
		return err
	}
	return c.kill()
}

func (h *harness) StopServer(ctx context.Context) error  { return h.s.stop(ctx) }
func (h *harness) StartServer(ctx context.Context) error { return h.s.start(ctx) }

func (h *harness) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.clients {
		c.close()
	}
	clear(h.clients)
	return nil
}
