package etcdlock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/etcdlock"
)

func TestNormalizePrefix(t *testing.T) {
	for in, want := range map[string]string{
		"": "distlock/", "/": "distlock/", "/locks": "locks/", "locks/": "locks/",
		"/a/b/": "a/b/", "/app.v1/x-y": "app.v1/x-y/",
	} {
		got, err := etcdlock.NormalizePrefix(in)
		if err != nil || got != want {
			t.Errorf("normalizePrefix(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"/a//b", "/%a", "/a/%b", "/a\x01"} {
		if _, err := etcdlock.NormalizePrefix(bad); !errors.Is(err, backend.ErrInvalidConfig) {
			t.Errorf("normalizePrefix(%q) err = %v, want ErrInvalidConfig", bad, err)
		}
	}
}

func TestEscapeKey(t *testing.T) {
	for in, want := range map[string]string{
		"a": "a", "a/b": "a%2Fb", "100%": "100%25", "%2F": "%252F", "/": "%2F", "ü €": "ü €",
	} {
		if got := etcdlock.EscapeKey(in); got != want {
			t.Errorf("escapeKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRangesDisjoint checks that no lock's range contains a key of another
// lock, whatever the keys and prefixes.
func TestRangesDisjoint(t *testing.T) {
	keys := []string{"a", "a/", "a/b", "a%2Fb", "a%", "b", "a/b/c", "%", "/", "//", "a b", "ab", "a.b", "%25"}
	prefixes := []string{"distlock/", "a/", "a/b/", "x/"}
	type lockID struct{ prefix, key string }
	ranges := map[string]lockID{}
	for _, p := range prefixes {
		for _, k := range keys {
			r := etcdlock.LockRange(p, k)
			if prev, dup := ranges[r]; dup {
				t.Fatalf("%v and %v share range %q", prev, lockID{p, k}, r)
			}
			ranges[r] = lockID{p, k}
		}
	}
	for r1, id1 := range ranges {
		member := r1 + "7587858a9f3c1d2e.1" // a key that lives in r1
		for r2, id2 := range ranges {
			if r1 != r2 && strings.HasPrefix(member, r2) {
				t.Errorf("range of %v (%q) contains key %q of %v", id2, r2, member, id1)
			}
		}
	}
}
