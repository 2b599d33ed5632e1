package redislock

import (
	"slices"
	"testing"

	"github.com/distlock/distlock/internal/redisproto"
)

// TestKeysFor: every name is the prefix, the escaped key in a hash tag and
// its suffix, and the scripts' KEYS lists name them in the scripts' order.
// redisproto.KeysFor runs on every acquisition attempt, so it makes them in two
// allocations (one string, one slice), not one per name and per list.
func TestKeysFor(t *testing.T) {
	for _, key := range []string{"k", "", "a{b}c", "100%", "%7B", "ключ"} {
		ks := redisproto.KeysFor("pfx", key)
		tag := "pfx:{" + redisproto.Escaper.Escape(key) + "}"
		want := redisproto.Keyset{Lock: tag + ":lock", Fence: tag + ":fence", Channel: tag + ":released", Queue: tag + ":queue", Alive: tag + ":alive", Last: tag + ":last"}
		if ks.Lock != want.Lock || ks.Fence != want.Fence || ks.Channel != want.Channel || ks.Queue != want.Queue || ks.Alive != want.Alive || ks.Last != want.Last {
			t.Errorf("KeysFor(%q) = %+v, want %+v", key, ks, want)
		}
		if got := ks.WaitKeys(); !slices.Equal(got, []string{want.Lock, want.Fence, want.Queue, want.Alive}) {
			t.Errorf("KeysFor(%q).WaitKeys() = %q", key, got)
		}
		if got := ks.ReleaseKeys(); !slices.Equal(got, []string{want.Lock, want.Queue, want.Alive, want.Fence, want.Last}) {
			t.Errorf("KeysFor(%q).ReleaseKeys() = %q", key, got)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = redisproto.KeysFor(DefaultPrefix, "some-key") }); n > 2 {
		t.Errorf("KeysFor makes %v allocations, want at most 2", n)
	}
}
