package redisproto

import (
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClientBounds is what New learns from a client's options about its
// calls' bounds.
type ClientBounds struct {
	// detach: the client does not end a call when its ctx ends (no
	// ContextTimeoutEnabled, or read/write deadlines disabled); the driver
	// runs calls it may have to stop waiting for on goroutines (await).
	Detach bool
	// deadlines: the client ends a call at its ctx's deadline (but not at
	// its cancellation).
	Deadlines bool
	// known: the options could be read (a *redis.Client, a
	// *redis.ClusterClient or a *redis.Ring).
	Known                     bool
	ctxTimeouts               bool
	readTimeout, writeTimeout time.Duration // as normalised by go-redis: 0 none, < 0 deadlines disabled
	kind                      string
}

func BoundsOf(c redis.UniversalClient) ClientBounds {
	var b ClientBounds
	switch c := c.(type) {
	case *redis.Client:
		o := c.Options()
		b = ClientBounds{Known: true, ctxTimeouts: o.ContextTimeoutEnabled, readTimeout: o.ReadTimeout, writeTimeout: o.WriteTimeout, kind: "redis.Options"}
	case *redis.ClusterClient:
		o := c.Options()
		b = ClientBounds{Known: true, ctxTimeouts: o.ContextTimeoutEnabled, readTimeout: o.ReadTimeout, writeTimeout: o.WriteTimeout, kind: "redis.ClusterOptions"}
	case *redis.Ring:
		o := c.Options()
		b = ClientBounds{Known: true, ctxTimeouts: o.ContextTimeoutEnabled, readTimeout: o.ReadTimeout, writeTimeout: o.WriteTimeout, kind: "redis.RingOptions"}
	default:
		return ClientBounds{Detach: true}
	}
	b.Deadlines = b.ctxTimeouts && b.readTimeout >= 0 && b.writeTimeout >= 0
	b.Detach = !b.Deadlines
	return b
}

// Warn logs, as pkg (the driver package), at New, what the client's options leave unbounded: nothing
// when the client ends calls at their ctx's deadline. The driver's calls
// return by their ctx either way; what the options decide is how long a
// call the driver stopped waiting for keeps its connection (and a
// goroutine): up to the ReadTimeout, or, with none, until the server
// answers.
func (b ClientBounds) Warn(l *slog.Logger, pkg string) {
	if !b.Known {
		l.Warn(pkg + ": the client's options cannot be read (not a *redis.Client, *redis.ClusterClient or *redis.Ring): a call that outlives its ctx is left running on a goroutine, its connection busy until the client returns it")
		return
	}
	if b.Deadlines {
		return
	}
	switch {
	case b.readTimeout < 0 || b.writeTimeout < 0:
		l.Warn(pkg+": the go-redis client sets no read or write deadlines (ReadTimeout or WriteTimeout -2), so no ctx bounds its calls: a call the driver stops waiting for at its ctx's end (a lease's renewal at its deadline, an Acquire or Release whose ctx ended) keeps its connection and a goroutine until the server answers, without bound; with the server stalled, the pool runs out of connections. Set a ReadTimeout and ContextTimeoutEnabled: true",
			"options", b.kind, "ReadTimeout", b.readTimeout, "WriteTimeout", b.writeTimeout, "ContextTimeoutEnabled", b.ctxTimeouts)
	case b.readTimeout == 0:
		l.Warn(pkg+": the go-redis client has no read timeout (ReadTimeout -1) and ignores ctx deadlines (ContextTimeoutEnabled false): a call the driver stops waiting for at its ctx's end (a lease's renewal at its deadline, an Acquire or Release whose ctx ended) keeps its connection and a goroutine until the server answers, without bound; with the server stalled, the pool runs out of connections. Set ContextTimeoutEnabled: true",
			"options", b.kind, "ReadTimeout", b.readTimeout, "ContextTimeoutEnabled", b.ctxTimeouts)
	default:
		l.Warn(pkg+": the go-redis client ignores ctx deadlines (ContextTimeoutEnabled false): a call the driver stops waiting for at its ctx's end (a lease's renewal at its deadline, an Acquire or Release whose ctx ended) keeps its connection busy for up to ReadTimeout; leases still end at their deadline and calls return by their ctx. Set ContextTimeoutEnabled: true to have the client end such calls itself",
			"options", b.kind, "ReadTimeout", b.readTimeout, "ContextTimeoutEnabled", b.ctxTimeouts)
	}
}
