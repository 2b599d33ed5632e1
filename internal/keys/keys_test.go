package keys

import (
	"strings"
	"testing"
)

// stores are the escapings under test, with what each store needs of an
// escaped key beyond the common properties.
var stores = []struct {
	name string
	e    *Escaper
	ok   func(key, esc string) string // why esc, the escaping of key, is wrong for the store; "" if it is not
}{
	{"Redis", Redis, func(_, esc string) string {
		if strings.ContainsAny(esc, "{}") {
			return "a brace would end the hash tag"
		}
		return ""
	}},
	{"Etcd", Etcd, func(_, esc string) string {
		if strings.Contains(esc, "/") {
			return "a '/' would split the key's segment"
		}
		return ""
	}},
	{"ZooKeeper", ZooKeeper, func(key, esc string) string {
		if key != "" && (esc == "" || esc == "." || esc == "..") {
			return "not a node name"
		}
		for i := 0; i < len(esc); i++ {
			if c := esc[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '%') {
				return "a byte that is not a letter, digit, '-', '_' or '%'"
			}
		}
		return ""
	}},
}

// TestEscape: fixed escapings, one table per store (the names in the
// stores are pinned in full by each driver's TestKeysOnTheWire).
func TestEscape(t *testing.T) {
	for _, c := range []struct {
		e         *Escaper
		key, want string
	}{
		{Redis, "orders", "orders"},
		{Redis, "{a}", "%7Ba%7D"},
		{Redis, "100%", "100%25"},
		{Redis, "a/b.c", "a/b.c"},
		{Etcd, "a/b", "a%2Fb"},
		{Etcd, "%2F", "%252F"},
		{Etcd, "{a} ключ", "{a} ключ"},
		{ZooKeeper, "A-Z_0", "A-Z_0"},
		{ZooKeeper, "..", "%2E%2E"},
		{ZooKeeper, "ключ", "%D0%BA%D0%BB%D1%8E%D1%87"},
		{ZooKeeper, "a\tb\xff", "a%09b%FF"},
	} {
		if got := c.e.Escape(c.key); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.key, got, c.want)
		}
		if got, ok := c.e.Unescape(c.want); !ok || got != c.key {
			t.Errorf("Unescape(%q) = %q, %v; want %q", c.want, got, ok, c.key)
		}
	}
}

// TestUnescapeRefuses what Escape never writes.
func TestUnescapeRefuses(t *testing.T) {
	for _, c := range []struct {
		e *Escaper
		s string
	}{
		{Redis, "%"}, {Redis, "%7"}, {Redis, "%7b"}, {Redis, "%41"}, {Redis, "a{b"}, {Redis, "a}"}, {Redis, "%%25"},
		{Etcd, "a/b"}, {Etcd, "%2f"}, {Etcd, "%7B"}, {Etcd, "100%"},
		{ZooKeeper, "a.b"}, {ZooKeeper, "%41"}, {ZooKeeper, "%2e"}, {ZooKeeper, "a b"}, {ZooKeeper, "%G0"},
	} {
		if got, ok := c.e.Unescape(c.s); ok {
			t.Errorf("Unescape(%q) = %q, true; Escape writes it for no key", c.s, got)
		}
	}
}

// TestEscapeAllocs: a key with nothing to escape costs no allocation
// (redislock escapes on every acquisition attempt).
func TestEscapeAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = Redis.Escape("some-key") }); n != 0 {
		t.Errorf("Escape of a plain key makes %v allocations, want 0", n)
	}
}

func TestCheckSegments(t *testing.T) {
	noDot := func(seg string) error {
		if strings.HasPrefix(seg, ".") {
			return errorString("starts with '.'")
		}
		return nil
	}
	for _, p := range []string{"a", "a/b", "a.b/c"} {
		if err := CheckSegments(p, noDot); err != nil {
			t.Errorf("CheckSegments(%q) = %v", p, err)
		}
	}
	for p, want := range map[string]string{
		"":     "an empty segment",
		"a//b": "an empty segment",
		"a/":   "an empty segment",
		"a/.b": `segment ".b": starts with '.'`,
	} {
		if err := CheckSegments(p, noDot); err == nil || err.Error() != want {
			t.Errorf("CheckSegments(%q) = %v, want %q", p, err, want)
		}
	}
	if err := CheckSegments("a/.b", nil); err != nil {
		t.Errorf("CheckSegments with no check = %v", err)
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

// FuzzEscape: for each store's escaping, distinct keys never share an
// escaped name, every escaped key unescapes to itself and has what the
// store needs (see stores), and Unescape accepts exactly what Escape
// writes, whatever the store returns (no panic).
func FuzzEscape(f *testing.F) {
	for _, p := range [][2]string{
		{"a", "a}"}, {"{a}", "%7Ba%7D"}, {"a%7D", "a%257D"}, {"%", "%25"}, {"x:{y}:lock", "x:%7By%7D:lock"}, // Redis
		{"a", "a/b"}, {"a%2Fb", "a/b"}, {"a", "ab"}, {"x/", "x%2F"}, // etcd
		{"..", "%2E%2E"}, {"a.b", "a%2Eb"}, {"\x00", "%00"}, {"lock-0000000001", "_c_x"}, // ZooKeeper
		{"ключ", "🔒"}, {"%2f", "%2F"}, {"", "%"},
	} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, st := range stores {
			ea, eb := st.e.Escape(a), st.e.Escape(b)
			if a != b && ea == eb {
				t.Fatalf("%s: keys %q and %q both escape to %q", st.name, a, b, ea)
			}
			if why := st.ok(a, ea); why != "" {
				t.Fatalf("%s: Escape(%q) = %q: %s", st.name, a, ea, why)
			}
			if got, ok := st.e.Unescape(ea); !ok || got != a {
				t.Fatalf("%s: Unescape(Escape(%q) = %q) = %q, %v", st.name, a, ea, got, ok)
			}
			for _, s := range []string{a, b} {
				if k, ok := st.e.Unescape(s); ok && st.e.Escape(k) != s {
					t.Fatalf("%s: Unescape(%q) = %q, but Escape(%q) = %q", st.name, s, k, k, st.e.Escape(k))
				}
			}
		}
	})
}
