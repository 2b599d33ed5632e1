package etcdlock

import (
	"errors"
	"fmt"
	"strings"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/keys"
)

// DefaultPrefix is the key prefix under which locks live when none is given.
const DefaultPrefix = "distlock/"

// Key layout. Every lock owns the range
//
//	<prefix>%<escaped key>/
//
// and each acquisition (holder or waiter) puts one key in that range,
// <range><lease id in hex>.<name slot in hex>, bound to the driver's lease
// (see takeSlot: a session reuses a lock's names, one per acquisition in
// progress or held).
//
// The escaped key never contains '/' ('%' and '/' are written as %25 and
// %2F), so no lock's range contains another lock's keys. Prefixes are made
// of segments that never start with '%', so a prefix cannot nest inside a
// lock's range either, and two prefixes that differ keep their locks apart.

// normalizePrefix checks p and returns it ending with '/'. An empty p (or
// "/") gives DefaultPrefix.
func normalizePrefix(p string) (string, error) {
	p = strings.Trim(p, "/")
	if p == "" {
		return DefaultPrefix, nil
	}
	if err := keys.CheckSegments(p, checkSegment); err != nil {
		return "", fmt.Errorf("%w: prefix %q: %w", backend.ErrInvalidConfig, p, err)
	}
	return p + "/", nil
}

// checkSegment reports why seg cannot be a segment of a prefix.
func checkSegment(seg string) error {
	if strings.HasPrefix(seg, "%") {
		return errors.New("may not start with '%' (reserved for lock keys)")
	}
	for _, r := range seg {
		if r < 0x20 || r == 0x7f {
			return errors.New("has a control character")
		}
	}
	return nil
}

// escapeKey writes key with '%' and '/' percent-encoded (keys.Etcd), so
// the result has no '/'.
func escapeKey(key string) string { return keys.Etcd.Escape(key) }

// tombName returns the tombstone of the acquisition key name under prefix:
//
//	<prefix>tomb/<name after prefix, escaped>
//
// Every put of an acquisition key requires its tombstone to be absent, and
// the cleanup of a put whose fate is unknown creates the tombstone (bound
// to the driver's lease) in the same transaction as it deletes the key, so
// a put that reaches the server after that cleanup, however late, creates
// nothing (see Driver.bury). The escaped tail has no '/', and no segment
// before it starts with '%', so a tombstone lies in no lock's range, under
// this prefix or any other, and keyOf never takes it for a lock's key.
func tombName(prefix, name string) string {
	return prefix + "tomb/" + escapeKey(strings.TrimPrefix(name, prefix))
}

// lockRange returns the range of etcd keys that belong to key's lock under
// prefix (which ends with '/').
func lockRange(prefix, key string) string {
	return prefix + "%" + escapeKey(key) + "/"
}

// keyOf returns the lock key whose range holds the etcd key k, for k under
// prefix (which ends with '/'); false for a key the driver did not write.
func keyOf(prefix, k string) (string, bool) {
	rest, ok := strings.CutPrefix(k, prefix+"%")
	if !ok {
		return "", false
	}
	esc, _, ok := strings.Cut(rest, "/")
	if !ok {
		return "", false
	}
	return unescapeKey(esc)
}

// unescapeKey reverses escapeKey; false if esc is not its output.
func unescapeKey(esc string) (string, bool) { return keys.Etcd.Unescape(esc) }
