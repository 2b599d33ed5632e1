package etcdlock

import (
	"testing"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/urltest"
)

var urlParser = urltest.Parser{
	Base:      "etcd://127.0.0.1:2379/locks",
	Schemes:   []string{"etcd", "etcds"},
	Durations: []string{"ttl", "dial_timeout"},
	Others:    []string{"tls_ca", "tls_cert", "tls_key", "tls_server_name", "tls_insecure_skip_verify"},
	Parse:     func(u *backend.URL) error { _, err := parseURL(u); return err },
}

// Issue 27, item 6: every number parameter refuses NaN, infinities,
// exponents, negative, zero and overflowing values, naming itself.
func TestURLNumbers(t *testing.T) { urltest.CheckNumbers(t, urlParser) }

// Issue 27, item 7: no parameter's error shows a value Redacted hides.
func TestURLHiddenValues(t *testing.T) { urltest.CheckHidden(t, urlParser) }

func FuzzURLParams(f *testing.F) { urltest.Fuzz(f, urlParser) }
