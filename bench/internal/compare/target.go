package compare

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/bench/internal/measure"
)

// A Target is one lock library on one store: distlock, a peer library, or
// the store's bare round trip (its floor). Every workload measures it the
// same way, through internal/measure.
type Target struct {
	// Name labels the target in reports; it is unique within a run: the
	// store's name for distlock ("redis"), "store: library" otherwise
	// ("redis: redsync").
	Name string
	// Store names the store the target runs on ("redis"): the report
	// groups a store's targets. Empty means Name.
	Store string
	// Library is the peer library's name, or the round trip's for a floor
	// ("PING"). Empty means distlock.
	Library string
	// Floor marks a store's bare round trip, drawn as a reference, not as
	// a lock (it runs no crash-recovery).
	Floor bool
	// Fenced marks a store's fenced floor: the least lock of its kind
	// with a fencing token, written in the benchmark. It is measured as a
	// lock (crash recovery included); the verdict names it a floor.
	Fenced bool
	// URL opens a distlock client of the store; its password is never
	// printed.
	URL string
	// About says how a peer library, or a distlock made by New, is driven.
	About string
	// Version is the library's version, as the binary's build info gives
	// it ("v4.18.1"; "(devel)" for a checkout); empty if unknown.
	Version string
	// Conns says how many of the store's connections a held lease keeps
	// to itself ("1 (pinned while held)"); empty if unknown.
	Conns string
	// New, when not nil, makes a client of a peer library or floor, or a
	// distlock Locker built with a driver's New over a client of the
	// store, instead of a distlock Locker opened from URL.
	New func(ctx context.Context, ttl time.Duration) (measure.Contender, error)
	// Crash, when not nil, takes key with a client of its own and kills
	// that client in a way this process can observe (in-process backends
	// and peers). Without it, crash-recovery runs a holder process
	// ([HolderMain] in Config.Exe) and kills it with SIGKILL.
	Crash func(ctx context.Context, key string, ttl time.Duration) (killed time.Time, err error)
	// Counters, when not nil, reads the store's server counters of
	// requests received and fsyncs (NaN: not counted), both since the
	// server started; the uncontended workload reports them per pair.
	Counters func(ctx context.Context) (requests, fsyncs float64, err error)
	// RoundTrips, when not nil, returns the round trips counted so far on
	// the wire of the clients New makes; the uncontended workload reports
	// them per pair.
	RoundTrips func() float64
}

// StoreName returns the store the target runs on.
func (t Target) StoreName() string {
	if t.Store == "" {
		return t.Name
	}
	return t.Store
}

// LibraryName returns the library's name: "distlock" unless a peer's or a
// floor's.
func (t Target) LibraryName() string {
	if t.Library == "" {
		return "distlock"
	}
	return t.Library
}

// Display returns the target's URL without its password.
func (t Target) Display() string {
	u, err := backend.ParseURL(t.URL)
	if err != nil {
		return "(invalid URL)"
	}
	return u.Redacted()
}

// runs reports whether the target takes part in workload w.
func (t Target) runs(w string) bool {
	switch w {
	case "crash-recovery":
		return !t.Floor
	case "semaphore", "rw": // distlock's alone: the peers have neither
		return !t.Floor && t.LibraryName() == "distlock"
	}
	return true
}

// urlWithTTL returns the URL with a ttl parameter (unless it has one), so
// that backends whose locks live as long as a session (etcd, ZooKeeper)
// size their session by the workload's TTL too.
func (t Target) urlWithTTL(ttl time.Duration) string {
	u, err := backend.ParseURL(t.URL)
	if err != nil || u.Query.Has("ttl") {
		return t.URL
	}
	sep := "?"
	if strings.Contains(t.URL, "?") {
		sep = "&"
	}
	return t.URL + sep + "ttl=" + ttl.String()
}

// client returns a new client of the target with connections of its own.
func (t Target) client(ctx context.Context, ttl time.Duration) (measure.Contender, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if t.New != nil {
		x, err := t.New(ctx, ttl)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name, err)
		}
		return x, nil
	}
	l, err := distlock.Open(ctx, t.urlWithTTL(ttl), distlock.WithDefaultTTL(ttl))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.Name, err)
	}
	return lockerContender{l}, nil
}

// lockerContender is a Locker as the measurement core drives it.
type lockerContender struct{ l *distlock.Locker }

func (c lockerContender) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	le, err := c.l.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return le.Release, nil
}

func (c lockerContender) Close() { _ = c.l.Close() }

// Locker returns the Locker (the semaphore workload uses it).
func (c lockerContender) Locker() *distlock.Locker { return c.l }

// library makes clients of the target, each with connections of its own,
// as separate processes would have.
func (t Target) library(ctx context.Context, ttl time.Duration) measure.Library {
	return measure.Library{Name: t.Name, Make: func() (measure.Contender, error) { return t.client(ctx, ttl) }}
}
