package backend

import (
	"context"
	"time"
)

// SemaphoreInspector is implemented by drivers that can report a
// semaphore's grants without taking a permit (used by `distlock status
// --semaphore`). A driver without it cannot: the CLI says so.
type SemaphoreInspector interface {
	// InspectSemaphore reports the grants of key's semaphore held now.
	InspectSemaphore(ctx context.Context, key string) (SemaphoreInfo, error)
}

// RWInspector is implemented by drivers that can report a read-write
// lock's holders without taking it (used by `distlock status --rw`).
type RWInspector interface {
	// InspectRW reports the writer or readers of key's read-write lock.
	InspectRW(ctx context.Context, key string) (RWInfo, error)
}

// A Holder is one grant as an inspection reports it: a semaphore's grant
// of Permits permits, or one side of a read-write lock.
type Holder struct {
	Owner   string        `json:"owner"`
	Permits int           `json:"permits,omitempty"`
	Token   uint64        `json:"token,omitempty"` // 0 when the store cannot tell
	TTL     time.Duration `json:"ttl,omitempty"`   // remaining; 0 if unknown
}

// SemaphoreInfo is a semaphore's state: its grants in token order (a
// snapshot of one read).
type SemaphoreInfo struct {
	Key     string   `json:"key"`
	Held    int      `json:"held"` // permits held, in all
	Holders []Holder `json:"holders,omitempty"`
	// Waiters is the number of queued waiters, or -1 when the store does
	// not know (stores whose waiters poll or subscribe).
	Waiters int `json:"waiters"`
}

// RWInfo is a read-write lock's state: its writer, or its readers (one
// per owner, sorted by owner), or neither (free).
type RWInfo struct {
	Key     string   `json:"key"`
	Writer  *Holder  `json:"writer,omitempty"`
	Readers []Holder `json:"readers,omitempty"`
	// Waiters is the number of queued waiters, or -1 when the store does
	// not know.
	Waiters int `json:"waiters"`
}
