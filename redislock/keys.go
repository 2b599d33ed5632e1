package redislock

import (
	"fmt"
	"strings"
)

// DefaultPrefix starts every Redis key and channel the driver uses.
const DefaultPrefix = "distlock"

// keyset holds the Redis names used for one lock. All three carry the same
// hash tag, so they live in one Redis Cluster slot and one script may touch
// the lock and its counter together.
type keyset struct {
	lock    string // hash: o=owner, n=hold count, t=fencing token; has the TTL
	fence   string // counter of fencing tokens; never expires
	channel string // pub/sub channel announcing releases
}

// escaper makes user keys safe inside a hash tag: '{' and '}' would end the
// tag early, and '%' is escaped so that the encoding stays injective
// (distinct keys never map to the same Redis key).
var escaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// keysFor returns the Redis names for key under prefix.
func keysFor(prefix, key string) keyset {
	tag := prefix + ":{" + escaper.Replace(key) + "}"
	return keyset{lock: tag + ":lock", fence: tag + ":fence", channel: tag + ":released"}
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
