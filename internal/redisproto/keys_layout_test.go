package redisproto

import (
	"strings"
	"testing"
)

func TestKeysInjectiveAndTagged(t *testing.T) {
	keys := []string{"a", "a}", "{a}", "a%7D", "a%257D", "%", "{", "}", "x:{y}:lock", "ключ 🔒"}
	seen := map[string]string{}
	for _, k := range keys {
		ks := KeysFor(DefaultPrefix, k)
		if prev, dup := seen[ks.Lock]; dup {
			t.Errorf("keys %q and %q share the Redis key %q", prev, k, ks.Lock)
		}
		seen[ks.Lock] = k
		for _, name := range []string{ks.Lock, ks.Fence, ks.Channel} {
			if hashTag(name) != hashTag(ks.Lock) || hashTag(name) == "" {
				t.Errorf("%q: hash tag %q differs from the lock's %q", name, hashTag(name), hashTag(ks.Lock))
			}
		}
	}
}

// hashTag is what Redis Cluster hashes: the part between the first '{' and
// the next '}', when non-empty.
func hashTag(s string) string {
	i := strings.IndexByte(s, '{')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(s[i+1:], '}')
	if j <= 0 {
		return ""
	}
	return s[i+1 : i+1+j]
}
