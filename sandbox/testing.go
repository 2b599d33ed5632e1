package sandbox

import (
	"context"
	"errors"
	"testing"
	"time"
)

// StartT starts spec's servers for a test and closes them in t.Cleanup.
//
// When the servers cannot run on this machine ([ErrUnavailable]) the test
// is skipped in auto mode and fails when a provider was asked for
// explicitly (DISTLOCK_SANDBOX=docker or local), so a CI job that asks for
// real servers never passes without them. Any other error fails the test.
// Progress messages go to t.Logf.
func StartT(t testing.TB, spec Spec) *Group {
	t.Helper()
	if spec.Logf == nil {
		spec.Logf = t.Logf
	}
	timeout := spec.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	g, err := Start(ctx, spec)
	if err != nil {
		setting, serr := ProviderSetting(spec)
		if serr == nil && setting == ProviderAuto && errors.Is(err, ErrUnavailable) {
			t.Skipf("sandbox: no way to run %s here: %v", spec.Kind, err)
		}
		t.Fatalf("sandbox: start %s: %v", spec.Kind, err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("sandbox: close %s: %v", g, err)
		}
	})
	return g
}
