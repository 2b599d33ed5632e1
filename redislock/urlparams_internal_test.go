package redislock

import (
	"testing"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
	"github.com/distlock/distlock/internal/urltest"
)

var urlParser = urltest.Parser{
	Base:      "redis://127.0.0.1:6379/0",
	Schemes:   []string{"redis", "rediss"},
	Durations: []string{"dial_timeout", "read_timeout", "write_timeout", "cluster_refresh", "wait_timeout"},
	Ints:      []string{"pool_size", "wait_replicas"},
	Others: []string{"mode", "prefix", "wait", "allow_eviction", "tls_ca", "tls_cert", "tls_key",
		"tls_server_name", "tls_insecure_skip_verify"},
	Parse: func(u *backend.URL) error { _, err := redisproto.ParseConfig(u); return err },
}

// Issue 27, item 6: every number parameter refuses NaN, infinities,
// exponents, negative, zero and overflowing values, naming itself.
func TestURLNumbers(t *testing.T) { urltest.CheckNumbers(t, urlParser) }

// Issue 27, item 7: no parameter's error shows a value Redacted hides.
func TestURLHiddenValues(t *testing.T) { urltest.CheckHidden(t, urlParser) }

func FuzzURLParams(f *testing.F) { urltest.Fuzz(f, urlParser) }
