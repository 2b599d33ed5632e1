package redisproto

import (
	"fmt"
	"strings"

	"github.com/distlock/distlock/internal/keys"
)

// DefaultPrefix starts every Redis key and channel the driver uses.
const DefaultPrefix = "distlock"

// Keyset holds the Redis names used for one lock. All of them carry the same
// hash tag, so they live in one Redis Cluster slot and one script may touch
// the lock and its counter together.
type Keyset struct {
	Lock    string // hash: o=owner, n=hold count, t=fencing token, h=wait handed to; has the TTL
	Fence   string // counter of fencing tokens; never expires
	Channel string // pub/sub channel announcing releases and hand-offs
	Queue   string // queue mode: sorted set of waiting owners, oldest first
	Alive   string // queue mode: hash owner -> "deadline_ms:ttl_ms:window_ms:wait:attempt:inbox"
	Last    string // the hold whose release freed the lock, for ReleasedMemory

	// The KEYS of WaitScript and of ReleaseScript, made once with the
	// names: scripts run with them are not given a new slice each time.
	// Never modified.
	wait, release []string
}

// ReleaseKeys are the KEYS of ReleaseScript.
func (ks Keyset) ReleaseKeys() []string { return ks.release }

// WaitKeys are the KEYS of WaitScript.
func (ks Keyset) WaitKeys() []string { return ks.wait }

// Escaper makes user keys safe inside a hash tag: '{' and '}' would end the
// tag early, and '%' is escaped so that the encoding stays injective
// (distinct keys never map to the same Redis key).
var Escaper = keys.Redis

// keySuffixes name a lock's keys after its hash tag, in keyset's order.
var keySuffixes = [...]string{":lock", ":fence", ":released", ":queue", ":alive", ":last"}

// KeysFor returns the Redis names for key under prefix. Every acquisition
// attempt makes them, so they are cut from one string, and the scripts'
// KEYS lists share one slice: two allocations in all.
func KeysFor(prefix, key string) Keyset {
	esc := Escaper.Escape(key)
	tag := len(prefix) + len(":{") + len(esc) + len("}")
	var b strings.Builder
	b.Grow(len(keySuffixes)*tag + len(":lock:fence:released:queue:alive:last"))
	for _, suffix := range keySuffixes {
		b.WriteString(prefix)
		b.WriteString(":{")
		b.WriteString(esc)
		b.WriteString("}")
		b.WriteString(suffix)
	}
	all := b.String()
	var names [len(keySuffixes)]string
	for i, suffix := range keySuffixes {
		names[i], all = all[:tag+len(suffix)], all[tag+len(suffix):]
	}
	ks := Keyset{Lock: names[0], Fence: names[1], Channel: names[2], Queue: names[3], Alive: names[4], Last: names[5]}
	lists := []string{ks.Lock, ks.Fence, ks.Queue, ks.Alive, ks.Lock, ks.Queue, ks.Alive, ks.Fence, ks.Last}
	ks.wait, ks.release = lists[:4:4], lists[4:]
	return ks
}

// CheckPrefix reports why prefix cannot start Redis keys.
func CheckPrefix(prefix string) error {
	if prefix == "" {
		return fmt.Errorf("prefix is empty")
	}
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("prefix %q contains '{' or '}', which would break the hash tag", prefix)
	}
	return nil
}

// KeyOf returns the user key whose lock hash is the Redis key k under
// prefix; false for a key the driver did not write.
func KeyOf(prefix, k string) (string, bool) {
	rest, ok := strings.CutPrefix(k, prefix+":{")
	if !ok {
		return "", false
	}
	esc, ok := strings.CutSuffix(rest, "}:lock")
	if !ok {
		return "", false
	}
	return Escaper.Unescape(esc)
}

// GlobEscape escapes the characters a SCAN MATCH pattern treats specially.
func GlobEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`).Replace(s)
}
