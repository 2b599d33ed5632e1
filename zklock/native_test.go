package zklock

import (
	"errors"
	"net"

	"github.com/go-zookeeper/zk"
)

// NativeError implements conformance.NativeErrors: go-zookeeper's errors
// are sentinel values.
func (h *harness) NativeError(err error) bool {
	var nerr net.Error
	for _, z := range []error{zk.ErrConnectionClosed, zk.ErrNoServer, zk.ErrSessionExpired, zk.ErrSessionMoved, zk.ErrClosing} {
		if errors.Is(err, z) {
			return true
		}
	}
	return errors.As(err, &nerr)
}
