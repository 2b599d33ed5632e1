package zklock

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEncodeKey(t *testing.T) {
	cases := map[string]string{
		"orders":    "orders",
		"a/b":       "a%2Fb",
		"a%2Fb":     "a%252Fb",
		".":         "%2E",
		"..":        "%2E%2E",
		"a/../b":    "a%2F%2E%2E%2Fb",
		"zookeeper": "zookeeper",
		"ключ":      "%D0%BA%D0%BB%D1%8E%D1%87",
		"a b":       "a%20b",
		"a\tb":      "a%09b",
		"A-Z_0":     "A-Z_0",
		"{a}":       "%7Ba%7D",
	}
	for key, want := range cases {
		got := encodeKey(key)
		if got != want {
			t.Errorf("encodeKey(%q) = %q, want %q", key, got, want)
		}
		if err := checkSegment(got); err != nil {
			t.Errorf("encodeKey(%q) = %q is not a valid node name: %v", key, got, err)
		}
		if err := validZKPath(defaultBase + "/" + got); err != nil {
			t.Errorf("encodeKey(%q): %v", key, err)
		}
		back, ok := decodeKey(got)
		if !ok || back != key {
			t.Errorf("decodeKey(%q) = %q, %v; want %q", got, back, ok, key)
		}
	}
}

func TestEncodeKeyInjective(t *testing.T) {
	keys := []string{"a/b", "a%2Fb", "a_b", "a/b/", "/a/b", "a//b", ".", "..", "a/../b", "a/./b",
		"e\u0301", "\u00e9", "A", "a", "a b", "a\u00a0b", "%", "%25", "lock-0000000001", "_c_x", "-"}
	seen := map[string]string{}
	for _, k := range keys {
		enc := encodeKey(k)
		if prev, dup := seen[enc]; dup {
			t.Errorf("keys %q and %q both encode to %q", prev, k, enc)
		}
		seen[enc] = k
		if strings.ContainsAny(enc, "/.") || !utf8.ValidString(enc) {
			t.Errorf("encodeKey(%q) = %q keeps a path character", k, enc)
		}
	}
}

func TestCleanBase(t *testing.T) {
	good := map[string]string{"": defaultBase, "/": defaultBase, "/locks": "/locks", "/app/locks/": "/app/locks", "/ключ": "/ключ"}
	for in, want := range good {
		if got, err := cleanBase(in); err != nil || got != want {
			t.Errorf("cleanBase(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"locks", "/a//b", "/a/./b", "/a/../b", "/zookeeper", "/zookeeper/x", "/a\x01b", "/a\u0085"} {
		if got, err := cleanBase(in); err == nil {
			t.Errorf("cleanBase(%q) = %q, want an error", in, got)
		}
	}
}

func TestQueueOrder(t *testing.T) {
	g := strings.Repeat("ab", 16)
	children := []string{
		"_c_" + g + "-lock-0000000010",
		"junk",
		"_c_" + g + "-lock-0000000002",
		"_c_" + g + "-lock-0000000100",
		"_c_short-lock-0000000001",
	}
	q := queueOf(children)
	if len(q) != 3 || q[0].seq != 2 || q[1].seq != 10 || q[2].seq != 100 {
		t.Fatalf("queueOf = %+v, want sequences 2, 10, 100", q)
	}
	if position(q, children[0]) != 1 || position(q, "junk") != -1 {
		t.Errorf("position wrong in %+v", q)
	}
}
