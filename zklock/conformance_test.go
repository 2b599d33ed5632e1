package zklock

import (
	"context"
	"testing"

	"github.com/distlock/distlock/conformance"
)

func TestConformance(t *testing.T) {
	c := startCluster(t, 1)
	conformance.Run(t, func(context.Context, *testing.T) (conformance.Harness, error) {
		return harness{c: c}, nil
	})
}

func TestConformanceEnsemble(t *testing.T) {
	c := startCluster(t, 3)
	conformance.Run(t, func(context.Context, *testing.T) (conformance.Harness, error) {
		return harness{c: c}, nil
	})
}
