package redislock

import (
	"slices"
	"testing"
)

// TestKeysFor: every name is the prefix, the escaped key in a hash tag and
// its suffix, and the scripts' KEYS lists name them in the scripts' order.
// keysFor runs on every acquisition attempt, so it makes them in two
// allocations (one string, one slice), not one per name and per list.
func TestKeysFor(t *testing.T) {
	for _, key := range []string{"k", "", "a{b}c", "100%", "%7B", "ключ"} {
		ks := keysFor("pfx", key)
		tag := "pfx:{" + escaper.Escape(key) + "}"
		want := keyset{lock: tag + ":lock", fence: tag + ":fence", channel: tag + ":released", queue: tag + ":queue", alive: tag + ":alive", last: tag + ":last"}
		if ks.lock != want.lock || ks.fence != want.fence || ks.channel != want.channel || ks.queue != want.queue || ks.alive != want.alive || ks.last != want.last {
			t.Errorf("keysFor(%q) = %+v, want %+v", key, ks, want)
		}
		if got := ks.waitKeys(); !slices.Equal(got, []string{want.lock, want.fence, want.queue, want.alive}) {
			t.Errorf("keysFor(%q).waitKeys() = %q", key, got)
		}
		if got := ks.releaseKeys(); !slices.Equal(got, []string{want.lock, want.queue, want.alive, want.fence, want.last}) {
			t.Errorf("keysFor(%q).releaseKeys() = %q", key, got)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = keysFor(DefaultPrefix, "some-key") }); n > 2 {
		t.Errorf("keysFor makes %v allocations, want at most 2", n)
	}
}
