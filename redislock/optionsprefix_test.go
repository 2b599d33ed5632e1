package redislock

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
)

// New defaults an empty Options.Prefix and refuses one that would break the
// hash tag, with a redislock: error matching ErrInvalidConfig.
func TestOptionsPrefix(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	d, err := New(c, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if d.opts.Prefix != DefaultPrefix {
		t.Errorf("New with no prefix: %q, want %q", d.opts.Prefix, DefaultPrefix)
	}
	_ = d.Close()
	_, err = New(c, &Options{Prefix: "a{b"})
	if !errors.Is(err, backend.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "redislock: ") || !strings.Contains(err.Error(), "hash tag") {
		t.Errorf("New with the prefix a{b: %v, want a redislock: error matching ErrInvalidConfig that names the hash tag", err)
	}
}
