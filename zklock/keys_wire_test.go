package zklock

import "testing"

// TestKeysOnTheWire pins the node paths of every primitive's key, byte for
// byte, as released versions wrote them: a driver that names a key
// differently does not see the locks an older one holds, so two versions
// running side by side during an upgrade would both grant the same lock.
// Change a path here only with a migration.
func TestKeysOnTheWire(t *testing.T) {
	d := &Driver{base: defaultBase}
	for _, c := range []struct{ key, mutex, rw, rwFence, sem string }{
		{"orders", "/distlock/orders", "/distlock/rw.orders", "/distlock/rwfence.orders", "/distlock/sem.orders"},
		{"", "/distlock/", "/distlock/rw.", "/distlock/rwfence.", "/distlock/sem."},
		{"a/b", "/distlock/a%2Fb", "/distlock/rw.a%2Fb", "/distlock/rwfence.a%2Fb", "/distlock/sem.a%2Fb"},
		{"100%", "/distlock/100%25", "/distlock/rw.100%25", "/distlock/rwfence.100%25", "/distlock/sem.100%25"},
		{"%7B", "/distlock/%257B", "/distlock/rw.%257B", "/distlock/rwfence.%257B", "/distlock/sem.%257B"},
		{"{a}", "/distlock/%7Ba%7D", "/distlock/rw.%7Ba%7D", "/distlock/rwfence.%7Ba%7D", "/distlock/sem.%7Ba%7D"},
		{"a}b{", "/distlock/a%7Db%7B", "/distlock/rw.a%7Db%7B", "/distlock/rwfence.a%7Db%7B", "/distlock/sem.a%7Db%7B"},
		{"ключ", "/distlock/%D0%BA%D0%BB%D1%8E%D1%87", "/distlock/rw.%D0%BA%D0%BB%D1%8E%D1%87", "/distlock/rwfence.%D0%BA%D0%BB%D1%8E%D1%87", "/distlock/sem.%D0%BA%D0%BB%D1%8E%D1%87"},
		{"a b", "/distlock/a%20b", "/distlock/rw.a%20b", "/distlock/rwfence.a%20b", "/distlock/sem.a%20b"},
		{".", "/distlock/%2E", "/distlock/rw.%2E", "/distlock/rwfence.%2E", "/distlock/sem.%2E"},
		{"..", "/distlock/%2E%2E", "/distlock/rw.%2E%2E", "/distlock/rwfence.%2E%2E", "/distlock/sem.%2E%2E"},
		{"%2F", "/distlock/%252F", "/distlock/rw.%252F", "/distlock/rwfence.%252F", "/distlock/sem.%252F"},
		{"x:{y}:lock", "/distlock/x%3A%7By%7D%3Alock", "/distlock/rw.x%3A%7By%7D%3Alock", "/distlock/rwfence.x%3A%7By%7D%3Alock", "/distlock/sem.x%3A%7By%7D%3Alock"},
		{"a*b?[c]", "/distlock/a%2Ab%3F%5Bc%5D", "/distlock/rw.a%2Ab%3F%5Bc%5D", "/distlock/rwfence.a%2Ab%3F%5Bc%5D", "/distlock/sem.a%2Ab%3F%5Bc%5D"},
		{"\x00\xff", "/distlock/%00%FF", "/distlock/rw.%00%FF", "/distlock/rwfence.%00%FF", "/distlock/sem.%00%FF"},
	} {
		if got := d.base + "/" + encodeKey(c.key); got != c.mutex {
			t.Errorf("key %q: mutex parent %q, want %q", c.key, got, c.mutex)
		}
		if got := d.rwParent(c.key); got != c.rw {
			t.Errorf("key %q: read-write parent %q, want %q", c.key, got, c.rw)
		}
		if got := d.rwFence(c.key); got != c.rwFence {
			t.Errorf("key %q: read-write fence %q, want %q", c.key, got, c.rwFence)
		}
		if got := d.semParent(c.key); got != c.sem {
			t.Errorf("key %q: semaphore parent %q, want %q", c.key, got, c.sem)
		}
		seg := c.mutex[len(defaultBase)+1:]
		if k, ok := decodeKey(seg); !ok || k != c.key {
			t.Errorf("decodeKey(%q) = %q, %v; want %q", seg, k, ok, c.key)
		}
	}
}
