package etcdlock

import "testing"

// TestKeysOnTheWire pins the etcd keys of every primitive, byte for byte,
// as released versions wrote them: a driver that names a key differently
// does not see the locks an older one holds, so two versions running side
// by side during an upgrade would both grant the same lock. Change a key
// here only with a migration.
func TestKeysOnTheWire(t *testing.T) {
	const name = "1a2b.0" // an acquisition key's name in its range
	for _, c := range []struct{ key, mutex, rw, rwFence, sem, tomb string }{
		{"orders", "distlock/%orders/", "distlock/%orders%rw/", "distlock/%orders%rwfence", "distlock/%orders%sem/", "distlock/tomb/%25orders%2F1a2b.0"},
		{"", "distlock/%/", "distlock/%%rw/", "distlock/%%rwfence", "distlock/%%sem/", "distlock/tomb/%25%2F1a2b.0"},
		{"a/b", "distlock/%a%2Fb/", "distlock/%a%2Fb%rw/", "distlock/%a%2Fb%rwfence", "distlock/%a%2Fb%sem/", "distlock/tomb/%25a%252Fb%2F1a2b.0"},
		{"100%", "distlock/%100%25/", "distlock/%100%25%rw/", "distlock/%100%25%rwfence", "distlock/%100%25%sem/", "distlock/tomb/%25100%2525%2F1a2b.0"},
		{"%7B", "distlock/%%257B/", "distlock/%%257B%rw/", "distlock/%%257B%rwfence", "distlock/%%257B%sem/", "distlock/tomb/%25%25257B%2F1a2b.0"},
		{"{a}", "distlock/%{a}/", "distlock/%{a}%rw/", "distlock/%{a}%rwfence", "distlock/%{a}%sem/", "distlock/tomb/%25{a}%2F1a2b.0"},
		{"a}b{", "distlock/%a}b{/", "distlock/%a}b{%rw/", "distlock/%a}b{%rwfence", "distlock/%a}b{%sem/", "distlock/tomb/%25a}b{%2F1a2b.0"},
		{"ключ", "distlock/%ключ/", "distlock/%ключ%rw/", "distlock/%ключ%rwfence", "distlock/%ключ%sem/", "distlock/tomb/%25ключ%2F1a2b.0"},
		{"a b", "distlock/%a b/", "distlock/%a b%rw/", "distlock/%a b%rwfence", "distlock/%a b%sem/", "distlock/tomb/%25a b%2F1a2b.0"},
		{".", "distlock/%./", "distlock/%.%rw/", "distlock/%.%rwfence", "distlock/%.%sem/", "distlock/tomb/%25.%2F1a2b.0"},
		{"..", "distlock/%../", "distlock/%..%rw/", "distlock/%..%rwfence", "distlock/%..%sem/", "distlock/tomb/%25..%2F1a2b.0"},
		{"%2F", "distlock/%%252F/", "distlock/%%252F%rw/", "distlock/%%252F%rwfence", "distlock/%%252F%sem/", "distlock/tomb/%25%25252F%2F1a2b.0"},
		{"x:{y}:lock", "distlock/%x:{y}:lock/", "distlock/%x:{y}:lock%rw/", "distlock/%x:{y}:lock%rwfence", "distlock/%x:{y}:lock%sem/", "distlock/tomb/%25x:{y}:lock%2F1a2b.0"},
		{"a*b?[c]", "distlock/%a*b?[c]/", "distlock/%a*b?[c]%rw/", "distlock/%a*b?[c]%rwfence", "distlock/%a*b?[c]%sem/", "distlock/tomb/%25a*b?[c]%2F1a2b.0"},
		{"\x00\xff", "distlock/%\x00\xff/", "distlock/%\x00\xff%rw/", "distlock/%\x00\xff%rwfence", "distlock/%\x00\xff%sem/", "distlock/tomb/%25\x00\xff%2F1a2b.0"},
	} {
		for _, g := range []struct{ what, got, want string }{
			{"mutex range", lockRange(DefaultPrefix, c.key), c.mutex},
			{"read-write range", rwRange(DefaultPrefix, c.key), c.rw},
			{"read-write fence", rwFence(DefaultPrefix, c.key), c.rwFence},
			{"semaphore range", semRange(DefaultPrefix, c.key), c.sem},
			{"tombstone", tombName(DefaultPrefix, c.mutex+name), c.tomb},
		} {
			if g.got != g.want {
				t.Errorf("key %q: %s %q, want %q", c.key, g.what, g.got, g.want)
			}
		}
		if k, ok := keyOf(DefaultPrefix, c.mutex+name); !ok || k != c.key {
			t.Errorf("keyOf(%q) = %q, %v; want %q", c.mutex+name, k, ok, c.key)
		}
	}
}
