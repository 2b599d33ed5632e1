package distlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxKeyLen is the longest key, in bytes, that any backend accepts. A
// backend may accept less (backend.Capabilities.MaxKeyLen).
const MaxKeyLen = 1024

// checkKey reports why key cannot name a lock.
func checkKey(key string, max int) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: key is empty", ErrInvalidKey)
	case len(key) > max:
		return fmt.Errorf("%w: key is %d bytes long, the limit is %d", ErrInvalidKey, len(key), max)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: key %q is not valid UTF-8", ErrInvalidKey, key)
	}
	for i, r := range key {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return fmt.Errorf("%w: key %q has control character U+%04X at byte %d", ErrInvalidKey, key, r, i)
		}
	}
	return nil
}

// checkOwner reports why owner cannot identify a holder.
func checkOwner(owner string) error {
	if owner == "" || len(owner) > 128 {
		return fmt.Errorf("%w: owner id must be 1 to 128 bytes, got %d", ErrInvalidConfig, len(owner))
	}
	for _, r := range owner {
		if r < 0x21 || r > 0x7e {
			return fmt.Errorf("%w: owner id %q must be printable ASCII without spaces", ErrInvalidConfig, owner)
		}
	}
	return nil
}

// newOwner returns 128 random bits, hex-encoded.
func newOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

type ownerKey struct{}

// ContextWithOwner returns a context that makes Acquire use owner, so that a
// caller holding a lease under owner re-enters it. Lease.Context already
// carries its owner; use this to pass an owner received from elsewhere
// (e.g. over RPC). The owner must be valid as for WithOwner (1 to 128
// printable bytes): Acquire refuses another with ErrInvalidConfig.
func ContextWithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// OwnerFromContext returns the owner carried by ctx, if any.
func OwnerFromContext(ctx context.Context) (string, bool) {
	o, ok := ctx.Value(ownerKey{}).(string)
	return o, ok && o != ""
}
