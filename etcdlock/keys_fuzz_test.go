package etcdlock

import (
	"strings"
	"testing"
)

// FuzzLockRange: distinct keys get ranges neither of which is a prefix of
// the other (a lock is every etcd key under its range), a range has no
// '/' but its last byte, so it stays one segment under the prefix, every
// key the driver writes in a lock's range maps back to that lock's key
// (keyOf), and keyOf never panics on what the store returns. (The
// escaping itself: internal/keys FuzzEscape.)
func FuzzLockRange(f *testing.F) {
	for _, p := range [][2]string{{"a", "a/b"}, {"a%2Fb", "a/b"}, {"%", "%25"}, {"a", "ab"}, {"x/", "x%2F"}, {"ключ", "🔒"},
		{"100%/x", "1a2b.0"}, {"%2F", "%/"}} {
		f.Add(p[0], p[1])
	}
	const prefix = DefaultPrefix
	f.Fuzz(func(t *testing.T, k1, k2 string) {
		r1, r2 := lockRange(prefix, k1), lockRange(prefix, k2)
		_, _ = keyOf(prefix, prefix+k2) // any reply: no panic
		if got, ok := keyOf(prefix, r1+k2); !ok || got != k1 {
			t.Errorf("keyOf(lockRange(%q)+%q) = %q, %v", k1, k2, got, ok)
		}
		if k1 != k2 && (strings.HasPrefix(r1, r2) || strings.HasPrefix(r2, r1)) {
			t.Fatalf("keys %q and %q: ranges %q and %q overlap", k1, k2, r1, r2)
		}
		seg := strings.TrimPrefix(r1, prefix)
		if strings.Count(seg, "/") != 1 || !strings.HasSuffix(seg, "/") || !strings.HasPrefix(seg, "%") {
			t.Errorf("key %q: range %q is not one '%%'-led segment under %q", k1, r1, prefix)
		}
	})
}

// FuzzTombName: a tombstone lies in no lock's range (mutex, read-write or
// semaphore, of any key), under its own prefix or a prefix nested in it,
// is no read-write fence key, and keyOf never takes it for a lock's key.
func FuzzTombName(f *testing.F) {
	for _, p := range [][2]string{{"a", "a"}, {"%", "%25"}, {"tomb", "x"}, {"a/b", "%rw"}, {"ключ", "🔒"}} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, key, other string) {
		const prefix = DefaultPrefix
		for _, name := range []string{lockRange(prefix, key) + "1a2b.0", rwRange(prefix, key) + "w1a2b.0", semRange(prefix, key) + "1a2b.0"} {
			tomb := tombName(prefix, name)
			for _, p := range []string{prefix, prefix + "tomb/"} {
				for _, r := range []string{lockRange(p, other), rwRange(p, other), semRange(p, other)} {
					if strings.HasPrefix(tomb, r) {
						t.Fatalf("tombstone %q of %q lies in range %q", tomb, name, r)
					}
				}
				if tomb == rwFence(p, other) {
					t.Fatalf("tombstone %q is a fence key", tomb)
				}
				if k, ok := keyOf(p, tomb); ok {
					t.Fatalf("keyOf(%q, tombstone %q) = %q", p, tomb, k)
				}
			}
		}
	})
}
