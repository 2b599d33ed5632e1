package etcdlock_test

import (
	"errors"
	"net"

	"google.golang.org/grpc/status"
)

// NativeError implements conformance.NativeErrors: the etcd client's
// errors are gRPC status errors.
func (h *harness) NativeError(err error) bool {
	var nerr net.Error
	var serr interface{ GRPCStatus() *status.Status }
	return errors.As(err, &serr) || errors.As(err, &nerr)
}
