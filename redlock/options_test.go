package redlock

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
)

// TestWaitModeDefaults checks which wait mode New settles on.
func TestWaitModeDefaults(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	r, err := New([]redis.UniversalClient{c}, nil)
	if err != nil || r.opts.Wait != WaitQueue || r.caps.Wait != backend.WaitQueue || !r.caps.Fair {
		t.Errorf("New: %v", err)
	}
	r, err = New([]redis.UniversalClient{c}, &Options{Wait: WaitNotify})
	if err != nil || r.opts.Wait != WaitNotify || r.caps.Wait != backend.WaitNotify || r.caps.Fair {
		t.Errorf("Redlock + notify: %v", err)
	}
	for _, tc := range []struct {
		clients []redis.UniversalClient
		opts    *Options
		want    string
	}{
		{nil, nil, "at least one client"},
		{[]redis.UniversalClient{nil}, nil, "nil client"},
		{[]redis.UniversalClient{c}, &Options{Wait: 7}, "unknown Wait mode"},
		{[]redis.UniversalClient{c}, &Options{Prefix: "a{b"}, "hash tag"},
	} {
		if _, err := New(tc.clients, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "redlock: ") {
			t.Errorf("New(%v, %+v) = %v, want a redlock: error mentioning %q", tc.clients, tc.opts, err, tc.want)
		}
	}
}
