package redislock

import (
	"errors"
	"net"

	"github.com/redis/go-redis/v9"
)

// NativeError implements conformance.NativeErrors: a go-redis error (a
// server reply or redis.ErrClosed) or the network error of its connection.
func (h *harness) NativeError(err error) bool {
	var rerr redis.Error
	var nerr net.Error
	return errors.As(err, &rerr) || errors.As(err, &nerr) || errors.Is(err, redis.ErrClosed)
}
