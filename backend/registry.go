package backend

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Opener makes a Driver from a parsed URL. It must validate every part of u
// and report unknown parameters; it may dial the store, bounded by ctx.
type Opener func(ctx context.Context, u *URL) (Driver, error)

var registry struct {
	mu      sync.RWMutex
	openers map[string]Opener
}

// Register makes an Opener available under a URL scheme. It is meant to be
// called from a driver package's init function; it panics if the scheme is
// already registered, empty, or not lower-case letters, digits, '+', '-' or
// '.'.
func Register(scheme string, open Opener) {
	if open == nil {
		panic("backend: Register opener is nil for scheme " + scheme)
	}
	if !validScheme(scheme) {
		panic(fmt.Sprintf("backend: Register: invalid scheme %q", scheme))
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.openers == nil {
		registry.openers = make(map[string]Opener)
	}
	if _, dup := registry.openers[scheme]; dup {
		panic(fmt.Sprintf("backend: Register called twice for scheme %q", scheme))
	}
	registry.openers[scheme] = open
}

// Schemes returns the registered schemes, sorted.
func Schemes() []string {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	out := make([]string, 0, len(registry.openers))
	for s := range registry.openers {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Lookup returns the Opener for scheme. The error for an unknown scheme
// lists the registered ones and names the import that would register it.
func Lookup(scheme string) (Opener, error) {
	registry.mu.RLock()
	open := registry.openers[scheme]
	registry.mu.RUnlock()
	if open != nil {
		return open, nil
	}
	known := Schemes()
	list := "none"
	if len(known) > 0 {
		list = strings.Join(known, ", ")
	}
	hint := ""
	if pkg, ok := knownPackages[scheme]; ok {
		hint = fmt.Sprintf(` (did you forget import _ "github.com/distlock/distlock/%s"?)`, pkg)
	}
	return nil, fmt.Errorf("%w: unknown URL scheme %q; registered: %s%s", ErrInvalidConfig, scheme, list, hint)
}

// knownPackages maps the schemes of the project's own drivers to their
// packages, for the hint in Lookup's error.
var knownPackages = map[string]string{
	"redis": "redislock", "rediss": "redislock",
	"mysql": "sqllock", "postgres": "sqllock", "postgresql": "sqllock", "zk": "zklock", "zks": "zklock", "etcd": "etcdlock", "etcds": "etcdlock",
	"mem": "memlock",
}

func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}
