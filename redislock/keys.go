package redislock

import (
	"fmt"
	"strings"
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
}

// releaseKeys are the KEYS of releaseScript.
func (ks keyset) releaseKeys() []string { return []string{ks.lock, ks.queue, ks.alive, ks.fence} }

// waitKeys are the KEYS of waitScript.
func (ks keyset) waitKeys() []string { return []string{ks.lock, ks.fence, ks.queue, ks.alive} }

// escaper makes user keys safe inside a hash tag: '{' and '}' would end the
// tag early, and '%' is escaped so that the encoding stays injective
// (distinct keys never map to the same Redis key).
var escaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// keysFor returns the Redis names for key under prefix.
func keysFor(prefix, key string) keyset {
	tag := prefix + ":{" + escaper.Replace(key) + "}"
	return keyset{lock: tag + ":lock", fence: tag + ":fence", channel: tag + ":released",
		queue: tag + ":queue", alive: tag + ":alive"}
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

// unescaper reverses escaper.
var unescaper = strings.NewReplacer("%25", "%", "%7B", "{", "%7D", "}")

// keyOf returns the user key whose lock hash is the Redis key k under
// prefix; false for a key the driver did not write.
func keyOf(prefix, k string) (string, bool) {
	rest, ok := strings.CutPrefix(k, prefix+":{")
	if !ok {
		return "", false
	}
	esc, ok := strings.CutSuffix(rest, "}:lock")
	if !ok || strings.ContainsAny(esc, "{}") {
		return "", false
	}
	key := unescaper.Replace(esc)
	return key, escaper.Replace(key) == esc
}

// globEscape escapes the characters a SCAN MATCH pattern treats specially.
func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`).Replace(s)
}
