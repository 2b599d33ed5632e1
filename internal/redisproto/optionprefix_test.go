package redisproto

import (
	"errors"
	"strings"
	"testing"

	"github.com/distlock/distlock/backend"
)

// OptionPrefix defaults an empty prefix, keeps a good one, and refuses one
// that would break the hash tag with the driver's name and
// ErrInvalidConfig.
func TestOptionPrefix(t *testing.T) {
	if p, err := OptionPrefix("drv", ""); p != DefaultPrefix || err != nil {
		t.Errorf(`OptionPrefix("drv", "") = %q, %v; want %q, nil`, p, err, DefaultPrefix)
	}
	if p, err := OptionPrefix("drv", "app"); p != "app" || err != nil {
		t.Errorf(`OptionPrefix("drv", "app") = %q, %v; want "app", nil`, p, err)
	}
	for _, bad := range []string{"a{b", "a}b"} {
		_, err := OptionPrefix("drv", bad)
		if !errors.Is(err, backend.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "drv: ") || !strings.Contains(err.Error(), "hash tag") {
			t.Errorf("OptionPrefix(%q): %v, want a drv: error matching ErrInvalidConfig that names the hash tag", bad, err)
		}
	}
}
