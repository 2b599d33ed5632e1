// Package shim is for the tests' wrapping drivers: a wrapper that changes
// some answers of a driver whose store notifies (memlock) embeds
// Notifier, which forwards backend.Notifier's methods to the wrapped
// driver, so that the portable layer waits on the wrapper as on that
// driver (a wrapper of backend.Driver's methods only has its waits
// polled, see Capabilities.Polled).
package shim

import (
	"context"

	"github.com/distlock/distlock/backend"
)

// Notifier is Driver with its backend.Notifier methods forwarded; Driver
// must be a backend.Notifier.
type Notifier struct{ backend.Driver }

// Subscribe implements backend.Notifier by Driver's.
func (n Notifier) Subscribe(ctx context.Context, key string, kind backend.Kind) (<-chan struct{}, func(), error) {
	return n.Driver.(backend.Notifier).Subscribe(ctx, key, kind)
}

// Withdraw implements backend.Notifier by Driver's.
func (n Notifier) Withdraw(ctx context.Context, req backend.Request) error {
	return n.Driver.(backend.Notifier).Withdraw(ctx, req)
}
