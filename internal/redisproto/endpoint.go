package redisproto

import (
	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
)

// ServerOf is the address c is configured with: a Client's, a Cluster's
// first seed node; unknown for other clients (a Ring, a user's wrapper).
func ServerOf(c redis.UniversalClient) backend.Server {
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
