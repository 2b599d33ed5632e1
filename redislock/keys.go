package redislock

import (
	"fmt"
	"strings"

	"github.com/distlock/distlock/internal/keys"
)

// DefaultPrefix starts every Redis key and channel the driver uses.
const DefaultPrefix = "distlock"

// keyset holds the Redis names used for one lock. All of them carry the same
// hash tag, so they live in one Redis Cluster slot and one script may touch
// the lock and its counter together.
type keyset struct {
	lock    string // hash: o=owner, n=hold count, t=fencing token, h=wait handed to; has the TTL
	fence   string // counter of fencing tokens; never expires
	channel string // pub/sub channel announcing releases and hand-offs
	queue   string // queue mode: sorted set of waiting owners, oldest first
	alive   string // queue mode: hash owner -> "deadline_ms:ttl_ms:window_ms:wait:attempt:inbox"
	last    string // the hold whose release freed the lock, for releasedMemory

	// The KEYS of waitScript and of releaseScript, made once with the
	// names: scripts run with them are not given a new slice each time.
	// Never modified.
	wait, release []string
}

// releaseKeys are the KEYS of releaseScript.
func (ks keyset) releaseKeys() []string { return ks.release }

// waitKeys are the KEYS of waitScript.
func (ks keyset) waitKeys() []string { return ks.wait }

// escaper makes user keys safe inside a hash tag: '{' and '}' would end the
// tag early, and '%' is escaped so that the encoding stays injective
// (distinct keys never map to the same Redis key).
var escaper = keys.Redis

// keySuffixes name a lock's keys after its hash tag, in keyset's order.
var keySuffixes = [...]string{":lock", ":fence", ":released", ":queue", ":alive", ":last"}

// keysFor returns the Redis names for key under prefix. Every acquisition
// attempt makes them, so they are cut from one string, and the scripts'
// KEYS lists share one slice: two allocations in all.
func keysFor(prefix, key string) keyset {
	esc := escaper.Escape(key)
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
	ks := keyset{lock: names[0], fence: names[1], channel: names[2], queue: names[3], alive: names[4], last: names[5]}
	lists := []string{ks.lock, ks.fence, ks.queue, ks.alive, ks.lock, ks.queue, ks.alive, ks.fence, ks.last}
	ks.wait, ks.release = lists[:4:4], lists[4:]
	return ks
}

// checkPrefix reports why prefix cannot start Redis keys.
func checkPrefix(prefix string) error {
	if prefix == "" {
		return fmt.Errorf("prefix is empty")
	}
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("prefix %q contains '{' or '}', which would break the hash tag", prefix)
	}
	return nil
}

// keyOf returns the user key whose lock hash is the Redis key k under
// prefix; false for a key the driver did not write.
func keyOf(prefix, k string) (string, bool) {
	rest, ok := strings.CutPrefix(k, prefix+":{")
	if !ok {
		return "", false
	}
	esc, ok := strings.CutSuffix(rest, "}:lock")
	if !ok {
		return "", false
	}
	return escaper.Unescape(esc)
}

// globEscape escapes the characters a SCAN MATCH pattern treats specially.
func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`).Replace(s)
}
