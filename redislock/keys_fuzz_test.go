package redislock

import (
	"strings"
	"testing"
)

// FuzzKeysFor: distinct lock keys never share a Redis name, every name of
// one lock carries the same, whole hash tag (one Cluster slot), the lock
// hash maps back to its key (keyOf) and no other name of the lock is taken
// for a lock hash, and keyOf never panics on what SCAN returns. (The
// escaping itself: internal/keys FuzzEscape.)
func FuzzKeysFor(f *testing.F) {
	for _, p := range [][2]string{{"a", "a}"}, {"{a}", "%7Ba%7D"}, {"a%7D", "a%257D"}, {"%", "%25"}, {"x:{y}:lock", "x:%7By%7D:lock"}, {"ключ", "🔒"},
		{"a{b}", "distlock:{a}:lock"}, {"x*y?[z]", `back\\slash`}} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, k1, k2 string) {
		a, b := keysFor(DefaultPrefix, k1), keysFor(DefaultPrefix, k2)
		_, _ = keyOf(DefaultPrefix, k2) // any reply: no panic
		if got, ok := keyOf(DefaultPrefix, a.lock); !ok || got != k1 {
			t.Errorf("keyOf(lock hash of %q) = %q, %v", k1, got, ok)
		}
		for _, x := range []string{a.fence, a.channel, a.queue, a.alive, a.last} {
			if _, ok := keyOf(DefaultPrefix, x); ok {
				t.Errorf("keyOf takes %q, a name of %q's lock, for a lock hash", x, k1)
			}
		}
		if k1 != k2 {
			for _, x := range []string{a.lock, a.fence, a.channel, a.queue, a.alive} {
				for _, y := range []string{b.lock, b.fence, b.channel, b.queue, b.alive} {
					if x == y {
						t.Fatalf("keys %q and %q share the Redis name %q", k1, k2, x)
					}
				}
			}
		}
		tag := hashTag(a.lock)
		if tag == "" && k1 != "" {
			t.Errorf("key %q: lock name %q has no hash tag", k1, a.lock)
		}
		for _, x := range []string{a.fence, a.channel, a.queue, a.alive} {
			if hashTag(x) != tag {
				t.Errorf("key %q: %q and %q hash differently", k1, a.lock, x)
			}
		}
		if !strings.HasPrefix(a.lock, DefaultPrefix+":{") || strings.Count(a.lock, "{") != 1 || strings.Count(a.lock, "}") != 1 || hashTag(a.lock) != a.lock[len(DefaultPrefix)+2:len(a.lock)-len("}:lock")] {
			t.Errorf("key %q: lock name %q does not carry exactly one hash tag", k1, a.lock)
		}
	})
}
