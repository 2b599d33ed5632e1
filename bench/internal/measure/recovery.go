package measure

import (
	"context"
	"fmt"
	"time"
)

// Recovery measures how long a waiter needs to get a lock whose holder
// died holding it. kill makes a holder take key and then kills it, and
// returns when it died; waiter then acquires key, waiting at most limit,
// and releases it. The result runs from the death to the waiter's grant.
func Recovery(ctx context.Context, key string, waiter Contender, limit time.Duration,
	kill func(ctx context.Context, key string) (died time.Time, err error)) (time.Duration, error) {
	died, err := kill(ctx, key)
	if err != nil {
		return 0, err
	}
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	release, err := waiter.Acquire(wctx, key)
	got := time.Now()
	if err == nil {
		err = releaseWithin(ctx, release)
	}
	if err != nil {
		return 0, fmt.Errorf("waiter after the holder was killed: %w", err)
	}
	return got.Sub(died), nil
}
