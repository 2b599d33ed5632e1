package zklock

import (
	"errors"
	"fmt"
	"strings"

	"github.com/distlock/distlock/internal/keys"
)

// encodeKey turns a lock key into one ZooKeeper path segment (see
// keys.ZooKeeper). ASCII letters, digits, '-' and '_' stay as they are;
// every other byte (including '.', '/', '%', spaces, control characters
// and the bytes of non-ASCII runes) becomes %XX with upper-case hex. The
// mapping is injective, the result is never "", "." or "..", and it holds
// no character ZooKeeper rejects.
func encodeKey(key string) string { return keys.ZooKeeper.Escape(key) }

// decodeKey reverses encodeKey; false for a segment encodeKey does not
// write.
func decodeKey(seg string) (string, bool) { return keys.ZooKeeper.Unescape(seg) }

// cleanBase validates and normalises the base path of a URL or Options:
// "" and "/" mean the default, every segment must be a plain ZooKeeper node
// name, and the result starts with "/" and does not end with one.
func cleanBase(p string) (string, error) {
	p = strings.TrimSuffix(p, "/")
	if p == "" {
		return defaultBase, nil
	}
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("base path %q must start with /", p)
	}
	if err := keys.CheckSegments(p[1:], checkSegment); err != nil {
		return "", fmt.Errorf("base path %q: %w", p, err)
	}
	if p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/") {
		return "", fmt.Errorf("base path %q: /zookeeper is reserved by the server", p)
	}
	return p, nil
}

// checkSegment reports why seg is no plain ZooKeeper node name.
func checkSegment(seg string) error {
	switch seg {
	case "":
		return errors.New("empty path segment")
	case ".", "..":
		return errors.New("a relative path segment")
	}
	for _, r := range seg {
		if r < 0x20 || r >= 0x7f && r <= 0x9f || r >= 0xd800 && r <= 0xf8ff || r >= 0xfff0 {
			return fmt.Errorf("a character ZooKeeper rejects (%U)", r)
		}
	}
	return nil
}
