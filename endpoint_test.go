package distlock_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/memlock"
)

// atServer is memlock's driver naming a server (Capabilities.Server), as
// a network store's does.
type atServer struct {
	*memlock.Driver
	srv backend.Server
}

func (d atServer) Capabilities() backend.Capabilities {
	c := d.Driver.Capabilities()
	c.Server = d.srv
	return c
}

// TestServerAttributes: a driver's Capabilities.Server puts server.address,
// server.port and db.system.name on the metrics; a System left empty
// (etcd, ZooKeeper) puts no db.system.name, and a driver without
// Capabilities.Server none of them.
func TestServerAttributes(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		srv  backend.Server
		want []string
		none []string
	}{
		{backend.ServerOf("db1.example:6380", "redis"), []string{"server.address", "db1.example", "server.port", "6380", "db.system.name", "redis"}, nil},
		{backend.ServerOf("[::1]:2379", ""), []string{"server.address", "::1", "server.port", "2379"}, []string{"db.system.name"}},
		{backend.Server{}, nil, []string{"server.address", "server.port", "db.system.name"}},
	} {
		inner, _ := memlock.NewStore().NewDriver(nil)
		var d backend.Driver = inner
		if c.srv != (backend.Server{}) {
			d = atServer{inner, c.srv}
		}
		mp := newFakeMeterProvider()
		l := distlock.New(d, distlock.WithMeterProvider(mp))
		le, err := l.TryAcquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		_ = le.Release(ctx)
		_ = l.Close()
		if _, n := mp.m.get("distlock.acquire.duration", c.want...); n != 1 {
			t.Errorf("%+v: distlock.acquire.duration with %v has %d measurements, want 1", c.srv, c.want, n)
		}
		for _, s := range mp.m.sets() {
			for _, k := range c.none {
				if v, ok := s.Value(attribute.Key(k)); ok {
					t.Errorf("%+v: %s=%v recorded", c.srv, k, v.String())
				}
			}
		}
	}
}
