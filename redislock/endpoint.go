package redislock

import (
	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
)

var (
	_ backend.Endpoint = (*Driver)(nil)
	_ backend.Endpoint = (*Redlock)(nil)
)

// serverOf is the address c is configured with: a Client's, a Cluster's
// first seed node; unknown for other clients (a Ring, a user's wrapper).
func serverOf(c redis.UniversalClient) backend.Server {
	switch c := c.(type) {
	case *redis.Client:
		return backend.ServerOf(c.Options().Addr, "redis")
	case *redis.ClusterClient:
		if addrs := c.Options().Addrs; len(addrs) > 0 {
			return backend.ServerOf(addrs[0], "redis")
		}
	}
	return backend.Server{System: "redis"}
}

// Server implements backend.Endpoint.
func (d *Driver) Server() backend.Server { return serverOf(d.c) }

// Server implements backend.Endpoint: the first node's address.
func (r *Redlock) Server() backend.Server { return serverOf(r.nodes[0].c) }
