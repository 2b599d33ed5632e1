package memlock

import (
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/kinds"
)

var (
	_ backend.Waiter    = (*Driver)(nil)
	_ backend.Notifier  = (*Driver)(nil)
	_ backend.Inspector = (*Driver)(nil)
)

// byKind routes each entry point to the method of the request's kind
// (internal/kinds).
var byKind = kinds.Table[*Driver]{
	Name:             "memlock",
	TryMutex:         (*Driver).tryMutex,
	TryRW:            (*Driver).tryRW,
	TryPermits:       (*Driver).tryPermits,
	SubscribeMutex:   (*Driver).subscribeMutex,
	SubscribeRW:      (*Driver).subscribeRW,
	SubscribePermits: (*Driver).subscribePermits,
	InspectMutex:     (*Driver).inspectMutex,
	InspectRW:        (*Driver).inspectRW,
	InspectPermits:   (*Driver).inspectPermits,
}

// routes gives Driver its entry points through byKind: TryAcquire (a kind
// its Capabilities do not declare, in this mode, is refused), Subscribe
// and Inspect, for every kind: the mutex, the sides of a read-write lock
// (rwlock.go) and a semaphore's permits (semaphore.go).
type routes = kinds.Notifying[*Driver]
