package distlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/distlock/distlock"
)

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		url  string
		want []string // substrings of the error
	}{
		{"nosuch://host", []string{`unknown URL scheme "nosuch"`, "registered: mem"}},
		{"redis://127.0.0.1:1", []string{`unknown URL scheme "redis"`, `import _ "github.com/distlock/distlock/redislock"`}},
		{"localhost:6379", []string{"has no scheme"}},
		{"mem://?bogus=1", []string{"unknown parameter(s): bogus"}},
		{"mem://?ttl=banana", []string{`ttl="banana"`, "positive duration"}},
		{"mem://?ttl=-1s", []string{`ttl="-1s"`}},
		{"mem://?wait=sometimes", []string{`wait="sometimes"`, "notify, queue, poll"}},
		{"mem://a,b", []string{"want mem:// or mem://NAME"}},
		{"mem://h:99999", []string{`port "99999"`}},
		{"mem://user:s3cret@x/", []string{"xxxxx"}},
	} {
		l, err := distlock.Open(ctx, tc.url)
		if err == nil {
			l.Close()
			t.Errorf("Open(%q) succeeded", tc.url)
			continue
		}
		if !errors.Is(err, distlock.ErrInvalidConfig) {
			t.Errorf("Open(%q) = %v, want ErrInvalidConfig", tc.url, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Open(%q) = %q, want it to mention %q", tc.url, err, w)
			}
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) leaked the password: %v", tc.url, err)
		}
	}
}

func TestOpenTTLParameter(t *testing.T) {
	ctx := context.Background()
	l, err := distlock.Open(ctx, "mem://ttlparam?ttl=1h")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	le, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer le.Release(ctx)
	if d := le.Deadline(); d.Before(le.Deadline().Add(0)) || durationUntil(d) < 50*60e9 {
		t.Errorf("deadline %v: the ttl=1h parameter was not applied", d)
	}
}
