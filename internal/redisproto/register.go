package redisproto

import (
	"context"
	"fmt"
	"sync"

	"github.com/distlock/distlock/backend"
)

// Opener opens a driver for a redis:// or rediss:// URL whose parsed
// config is cfg: each driver package serves the modes it registered.
type Opener func(ctx context.Context, cfg Config) (backend.Driver, error)

// packages name the driver package of each mode, for the error of a URL
// whose mode no imported package serves.
var packages = map[string]string{
	ModeSingle:  "github.com/distlock/distlock/redislock",
	ModeCluster: "github.com/distlock/distlock/redislock",
	ModeRedlock: "github.com/distlock/distlock/redlock",
}

var registry struct {
	once    sync.Once
	mu      sync.Mutex
	openers map[string]Opener
}

// Register makes open serve the URLs of modes; the first call registers
// the redis:// and rediss:// schemes with backend.Register, so that
// redislock and redlock (each from its init) share the schemes and a
// program may import either or both. A mode registered twice panics.
func Register(open Opener, modes ...string) {
	registry.once.Do(func() {
		registry.openers = map[string]Opener{}
		backend.Register("redis", openURL)
		backend.Register("rediss", openURL)
	})
	registry.mu.Lock()
	defer registry.mu.Unlock()
	for _, m := range modes {
		if registry.openers[m] != nil {
			panic("redisproto: mode " + m + " registered twice")
		}
		registry.openers[m] = open
	}
}

// openURL is the backend.Opener of redis:// and rediss://: it parses the
// URL and hands it to the package registered for its mode, or names the
// import that would serve it.
func openURL(ctx context.Context, u *backend.URL) (backend.Driver, error) {
	cfg, err := ParseConfig(u)
	if err != nil {
		return nil, err
	}
	registry.mu.Lock()
	open := registry.openers[cfg.Mode]
	registry.mu.Unlock()
	if open == nil {
		return nil, fmt.Errorf("%w: %s://...?mode=%s is served by package %s, which the program does not import (add import _ %q)",
			backend.ErrInvalidConfig, u.Scheme, cfg.Mode, packages[cfg.Mode], packages[cfg.Mode])
	}
	return open(ctx, cfg)
}
