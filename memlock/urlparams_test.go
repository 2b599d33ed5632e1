package memlock_test

import (
	"context"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/urltest"
)

// Through distlock.Open, which reads ttl for every backend.
var urlParser = urltest.Parser{
	Base:      "mem://urltest",
	Schemes:   []string{"mem"},
	Durations: []string{"ttl"},
	Others:    []string{"wait"},
	ParseRaw: func(raw string) error {
		l, err := distlock.Open(context.Background(), raw)
		if err == nil {
			_ = l.Close()
		}
		return err
	},
}

// Issue 27, item 6: every number parameter refuses NaN, infinities,
// exponents, negative, zero and overflowing values, naming itself.
func TestURLNumbers(t *testing.T) { urltest.CheckNumbers(t, urlParser) }

// Issue 27, item 7: no parameter's error shows a value Redacted hides.
func TestURLHiddenValues(t *testing.T) { urltest.CheckHidden(t, urlParser) }

func FuzzURLParams(f *testing.F) { urltest.Fuzz(f, urlParser) }
