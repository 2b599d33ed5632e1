package redisproto

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
)

// TestServerOf: the address a client is configured with, for telemetry
// (backend.Capabilities.Server); no server is dialled.
func TestServerOf(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "cache-1.internal:6380"})
	defer c.Close()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"10.0.0.7:7000", "10.0.0.8:7000"}})
	defer cc.Close()
	for _, tc := range []struct {
		c    redis.UniversalClient
		want backend.Server
	}{
		{c, backend.Server{Address: "cache-1.internal", Port: 6380, System: "redis"}},
		{cc, backend.Server{Address: "10.0.0.7", Port: 7000, System: "redis"}},
	} {
		if got := ServerOf(tc.c); got != tc.want {
			t.Errorf("ServerOf(%T) = %+v, want %+v", tc.c, got, tc.want)
		}
	}
}
