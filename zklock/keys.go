package zklock

import (
	"errors"
	"fmt"
	"strings"
)

// encodeKey turns a lock key into one ZooKeeper path segment. ASCII letters,
// digits, '-' and '_' stay as they are; every other byte (including '.',
// '/', '%', spaces, control characters and the bytes of non-ASCII runes)
// becomes %XX with upper-case hex. The mapping is injective, the result is
// never "", "." or "..", and it holds no character ZooKeeper rejects.
func encodeKey(key string) string {
	var b strings.Builder
	b.Grow(len(key))
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// decodeKey reverses encodeKey.
func decodeKey(seg string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(seg) {
			return "", fmt.Errorf("zklock: truncated escape in %q", seg)
		}
		var v byte
		if _, err := fmt.Sscanf(seg[i+1:i+3], "%02X", &v); err != nil {
			return "", fmt.Errorf("zklock: bad escape in %q", seg)
		}
		b.WriteByte(v)
		i += 2
	}
	return b.String(), nil
}

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
	for _, seg := range strings.Split(p[1:], "/") {
		if err := checkSegment(seg); err != nil {
			return "", fmt.Errorf("base path %q: %w", p, err)
		}
	}
	if p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/") {
		return "", fmt.Errorf("base path %q: /zookeeper is reserved by the server", p)
	}
	return p, nil
}

func checkSegment(seg string) error {
	switch seg {
	case "":
		return errors.New("empty path segment")
	case ".", "..":
		return fmt.Errorf("relative path segment %q", seg)
	}
	for _, r := range seg {
		if r < 0x20 || r >= 0x7f && r <= 0x9f || r >= 0xd800 && r <= 0xf8ff || r >= 0xfff0 {
			return fmt.Errorf("segment %q has a character ZooKeeper rejects (%U)", seg, r)
		}
	}
	return nil
}
