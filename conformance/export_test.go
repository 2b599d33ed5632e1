package conformance

import (
	"context"

	"github.com/distlock/distlock"
)

// MultiLease is what the multi-lock cases need of a multi-lease.
type MultiLease = multiLease

// SetAcquireAll replaces how the multi-lock cases take several keys, so
// that broken_test.go can show they catch a broken multi-lock.
func SetAcquireAll(f func(ctx context.Context, l *distlock.Locker, keys []string, wait bool) (MultiLease, error)) {
	acquireAll = f
}
