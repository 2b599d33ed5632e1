package sqllock_test

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock/conformance"
)

func TestConformance(t *testing.T) {
	s := startServer(t)
	conformance.Run(t, func(context.Context, *testing.T) (conformance.Harness, error) {
		return newHarness(s, time.Second), nil
	})
}
