package zklock

import (
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/kinds"
)

var (
	_ backend.Waiter    = (*Driver)(nil)
	_ backend.Inspector = (*Driver)(nil)
)

// byKind routes each entry point to the method of the request's kind
// (internal/kinds).
var byKind = kinds.Table[*Driver]{
	Name:           "zklock",
	TryMutex:       (*Driver).tryMutex,
	TryRW:          kinds.TrySide((*Driver).tryRW),
	TryPermits:     (*Driver).tryPermits,
	WaitMutex:      (*Driver).waitMutex,
	WaitRW:         kinds.WaitSide((*Driver).waitRW),
	WaitPermits:    (*Driver).waitPermits,
	InspectMutex:   (*Driver).inspectMutex,
	InspectRW:      (*Driver).inspectRW,
	InspectPermits: (*Driver).inspectPermits,
}

// routes gives Driver its entry points through byKind: TryAcquire (a kind
// its Capabilities do not declare is refused), Wait and Inspect, for the
// mutex, the sides of a read-write lock and a semaphore's permits.
type routes = kinds.Waiting[*Driver]
