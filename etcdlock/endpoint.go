package etcdlock

import (
	"strings"

	"github.com/distlock/distlock/backend"
)

// server is Capabilities.Server: the client's first endpoint, its
// scheme dropped. etcd has no db.system.name in the semantic
// conventions.
func (d *Driver) server() backend.Server {
	eps := d.c.Endpoints()
	if len(eps) == 0 {
		return backend.Server{}
	}
	ep := eps[0]
	if _, rest, ok := strings.Cut(ep, "://"); ok {
		ep = rest
	}
	return backend.ServerOf(strings.TrimSuffix(ep, "/"), "")
}
