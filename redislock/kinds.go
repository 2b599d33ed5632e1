package redislock

import "github.com/distlock/distlock/internal/kinds"

// byKind routes each entry point to the method of the request's kind
// (internal/kinds).
var byKind = kinds.Table[*Driver]{
	Name:             "redislock",
	TryMutex:         (*Driver).tryMutex,
	TryRW:            kinds.TrySide((*Driver).tryRW),
	TryPermits:       (*Driver).tryPermits,
	WaitMutex:        (*Driver).waitMutex,
	SubscribeMutex:   (*Driver).subscribeMutex,
	SubscribeRW:      (*Driver).subscribeRW,
	SubscribePermits: (*Driver).subscribePermits,
	InspectMutex:     (*Driver).inspectMutex,
	InspectRW:        (*Driver).inspectRW,
	InspectPermits:   (*Driver).inspectPermits,
}

// routes gives Driver its entry points through byKind: TryAcquire (a kind
// its Capabilities do not declare, in this mode, is refused), Subscribe
// and Inspect for the mutex, the sides of a read-write lock and a
// semaphore's permits, and Wait for the mutex.
type routes = kinds.WaitingNotifying[*Driver]
