package redlock

import (
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
)

var _ backend.Endpoint = (*Driver)(nil)

// Server implements backend.Endpoint: the first node's address.
func (r *Driver) Server() backend.Server { return redisproto.ServerOf(r.nodes[0].c) }
