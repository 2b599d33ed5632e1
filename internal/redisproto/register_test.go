package redisproto

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/distlock/distlock/backend"
)

// TestRegisterNamesMissingPackage: with only the single-server modes
// registered (a program importing redislock alone), a Redlock URL fails
// with ErrInvalidConfig naming the import that serves it, before any
// dial; the registered modes reach their opener with the parsed config.
func TestRegisterNamesMissingPackage(t *testing.T) {
	var got Config
	Register(func(_ context.Context, cfg Config) (backend.Driver, error) {
		got = cfg
		return nil, errors.New("opened")
	}, ModeSingle, ModeCluster)
	open, err := backend.Lookup("redis")
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{"redis://h1,h2,h3?mode=redlock", "rediss://h1?mode=redlock"} {
		u, err := backend.ParseURL(raw)
		if err != nil {
			t.Fatal(err)
		}
		_, err = open(context.Background(), u)
		if !errors.Is(err, backend.ErrInvalidConfig) || !strings.Contains(err.Error(), `import _ "github.com/distlock/distlock/redlock"`) {
			t.Errorf("%s: %v, want ErrInvalidConfig naming the redlock import", raw, err)
		}
	}
	u, err := backend.ParseURL("redis://h1/2?prefix=p")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open(context.Background(), u); err == nil || err.Error() != "opened" || got.Mode != ModeSingle || got.DB != 2 || got.Prefix != "p" {
		t.Errorf("single mode: %v, config %+v", err, got)
	}
	defer func() {
		if recover() == nil {
			t.Error("a mode registered twice did not panic")
		}
	}()
	Register(func(context.Context, Config) (backend.Driver, error) { return nil, nil }, ModeSingle)
}
