package redisproto

import (
	"strings"
	"testing"
)

// FuzzKeysFor: distinct lock keys never share a Redis name, every name of
// one lock carries the same, whole hash tag (one Cluster slot), the lock
// hash maps back to its key (KeyOf) and no other name of the lock is taken
// for a lock hash, and KeyOf never panics on what SCAN returns. (The
// escaping itself: internal/keys FuzzEscape.)
func FuzzKeysFor(f *testing.F) {
	for _, p := range [][2]string{{"a", "a}"}, {"{a}", "%7Ba%7D"}, {"a%7D", "a%257D"}, {"%", "%25"}, {"x:{y}:lock", "x:%7By%7D:lock"}, {"ключ", "🔒"},
		{"a{b}", "distlock:{a}:lock"}, {"x*y?[z]", `back\\slash`}} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, k1, k2 string) {
		a, b := KeysFor(DefaultPrefix, k1), KeysFor(DefaultPrefix, k2)
		_, _ = KeyOf(DefaultPrefix, k2) // any reply: no panic
		if got, ok := KeyOf(DefaultPrefix, a.Lock); !ok || got != k1 {
			t.Errorf("KeyOf(lock hash of %q) = %q, %v", k1, got, ok)
		}
		for _, x := range []string{a.Fence, a.Channel, a.Queue, a.Alive, a.Last} {
			if _, ok := KeyOf(DefaultPrefix, x); ok {
				t.Errorf("KeyOf takes %q, a name of %q's lock, for a lock hash", x, k1)
			}
		}
		if k1 != k2 {
			for _, x := range []string{a.Lock, a.Fence, a.Channel, a.Queue, a.Alive} {
				for _, y := range []string{b.Lock, b.Fence, b.Channel, b.Queue, b.Alive} {
					if x == y {
						t.Fatalf("keys %q and %q share the Redis name %q", k1, k2, x)
					}
				}
			}
		}
		tag := hashTag(a.Lock)
		if tag == "" && k1 != "" {
			t.Errorf("key %q: lock name %q has no hash tag", k1, a.Lock)
		}
		for _, x := range []string{a.Fence, a.Channel, a.Queue, a.Alive} {
			if hashTag(x) != tag {
				t.Errorf("key %q: %q and %q hash differently", k1, a.Lock, x)
			}
		}
		if !strings.HasPrefix(a.Lock, DefaultPrefix+":{") || strings.Count(a.Lock, "{") != 1 || strings.Count(a.Lock, "}") != 1 || hashTag(a.Lock) != a.Lock[len(DefaultPrefix)+2:len(a.Lock)-len("}:lock")] {
			t.Errorf("key %q: lock name %q does not carry exactly one hash tag", k1, a.Lock)
		}
	})
}
