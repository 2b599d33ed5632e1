package conformance

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// trickyKeys differ from their neighbours only in characters some store
// treats specially: path separators, Redis Cluster hash tags, SQL and URL
// escapes, Unicode normalisation and case.
var trickyKeys = []string{
	"a/b", "a%2Fb", "a_b", "a/b/", "/a/b", "a//b", ".", "..", "a/../b", "a/./b",
	"a:b", "a::b", "{a}b", "a{b}", "{a}{b}", "{}", "{",
	"ключ", "键", "e\u0301", "\u00e9", "A", "a", "a b", "a\tb"[:1] + "\u00a0b",
	"'", "\"", "\\", "%", "*", "?", "a;b", "a' OR '1'='1", "a\\b",
	"zookeeper", "locks", "-", "lock-0000000001", "a" + strings.Repeat("x", 200),
	"a" + strings.Repeat("x", 199) + "y",
}

func testKeyIndependence(t *testing.T, e *env) {
	a, b := e.locker(t), e.locker(t)
	max := a.Capabilities().MaxKeyLen
	if max == 0 {
		max = distlock.MaxKeyLen
	}
	long := strings.Repeat("k", max-len(e.prefix)-1)
	keys := append(trickyKeys, long+"1", long+"2")
	var held []*distlock.Lease
	heldKeys := map[string]*distlock.Lease{}
	for i, k := range keys {
		if i%2 == 1 {
			continue
		}
		le, err := a.TryAcquire(ctxFor(t, 10*time.Second), e.prefix+k)
		if errors.Is(err, distlock.ErrInvalidKey) {
			t.Logf("key %q rejected: %v", k, err)
			continue
		}
		if err != nil {
			t.Fatalf("TryAcquire(%q) while holding only different keys: %v", k, err)
		}
		held = append(held, le)
		heldKeys[k] = le
	}
	for i, k := range keys {
		if i%2 == 0 {
			continue
		}
		le, err := b.TryAcquire(ctxFor(t, 10*time.Second), e.prefix+k)
		if errors.Is(err, distlock.ErrInvalidKey) {
			continue
		}
		if err != nil {
			t.Errorf("key %q is blocked by a different held key: %v", k, err)
			continue
		}
		release(t, le)
	}
	for k, le := range heldKeys {
		if isFree(t, b, e.prefix+k) {
			if err := le.Err(); err != nil {
				// Not two holders: the lease had ended; but it should
				// not have, its holder being alive.
				t.Errorf("key %q was free for another Locker after its lease ended while its holder was alive: %v", k, err)
				continue
			}
			t.Errorf("key %q was taken by another Locker while held", k)
		}
	}
	for _, le := range held {
		release(t, le)
	}
}

func testInvalidKeys(t *testing.T, e *env) {
	a := e.locker(t)
	for _, k := range []string{"", "a\x00b", "a\nb", "\xff\xfe", "\x7f", strings.Repeat("k", distlock.MaxKeyLen+1)} {
		_, err := a.TryAcquire(ctxFor(t, 10*time.Second), k)
		if !errors.Is(err, distlock.ErrInvalidKey) {
			t.Errorf("TryAcquire(%.20q) = %v, want ErrInvalidKey", k, err)
		}
	}
}
