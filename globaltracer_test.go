package distlock_test

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"go.opentelemetry.io/otel"

	"github.com/distlock/distlock/memlock"
)

// TestGlobalTracerSetLater: a Locker made with the default tracer provider
// (the global one) before the program sets an SDK makes no spans while
// none is set (the global default records nothing, so Acquire and Release
// skip it), and makes them as soon as otel.SetTracerProvider is called,
// without being made again. It runs in a child process: the global
// provider cannot be unset for the other tests.
func TestGlobalTracerSetLater(t *testing.T) {
	if os.Getenv("DISTLOCK_TEST_GLOBAL_TRACER") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestGlobalTracerSetLater$", "-test.count=1")
		cmd.Env = append(os.Environ(), "DISTLOCK_TEST_GLOBAL_TRACER=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	l := newLocker(t, memlock.NewStore(), "")
	ctx := context.Background()
	pair := func() {
		t.Helper()
		le, err := l.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pair()
	tp := newFakeTracerProvider(true)
	otel.SetTracerProvider(tp)
	pair()
	if a, r := len(tp.t.named("distlock.Acquire")), len(tp.t.named("distlock.Release")); a != 1 || r != 1 {
		t.Errorf("after otel.SetTracerProvider: %d Acquire and %d Release spans, want 1 and 1", a, r)
	}
}
