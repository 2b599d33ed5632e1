// Package testctx gives tests, the drivers' and the conformance suite's, a
// context bounded in time: the one helper they had written each for
// themselves.
package testctx

import (
	"context"
	"testing"
	"time"
)

// For returns a context that ends after d, and is canceled when t's
// cleanups run (after the cleanups registered later than this call, so
// those may use it, and For may be called inside a cleanup).
//
// It is not derived from t.Context(): that context is canceled before any
// cleanup runs, so a cleanup that releases a lock or restarts a server
// with it would fail at once.
func For(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
