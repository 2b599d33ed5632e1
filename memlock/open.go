package memlock

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/distlock/distlock/backend"
)

func init() {
	backend.Register("mem", open)
}

// named holds the stores opened by URL, created on first use.
var named struct {
	mu     sync.Mutex
	stores map[string]*Store
}

// Named returns the process-wide store called name ("" is the default
// store used by "mem://"), creating it on first use.
func Named(name string) *Store {
	named.mu.Lock()
	defer named.mu.Unlock()
	if named.stores == nil {
		named.stores = map[string]*Store{}
	}
	s := named.stores[name]
	if s == nil {
		s = NewStore()
		named.stores[name] = s
	}
	return s
}

func open(_ context.Context, u *backend.URL) (backend.Driver, error) {
	wait := u.Query.Enum("wait", string(backend.WaitNotify), "notify", "queue", "poll")
	if err := u.Query.Err(); err != nil {
		return nil, fmt.Errorf("memlock: %w", err)
	}
	if len(u.Hosts) > 1 || u.User != nil || strings.Trim(u.Path, "/") != "" {
		return nil, fmt.Errorf("memlock: %w: want mem:// or mem://NAME, got %s", backend.ErrInvalidConfig, u.Redacted())
	}
	name := ""
	if len(u.Hosts) == 1 {
		name = u.Hosts[0]
	}
	return Named(name).NewDriver(&Options{Wait: backend.WaitKind(wait)})
}
