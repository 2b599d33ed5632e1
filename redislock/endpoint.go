package redislock

import (
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
)

var _ backend.Endpoint = (*Driver)(nil)

// Server implements backend.Endpoint.
func (d *Driver) Server() backend.Server { return redisproto.ServerOf(d.c) }
