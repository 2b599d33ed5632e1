package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/sandbox"
)

// Provider choice: docker mode fails with the fix named, auto mode falls
// back to local processes.

func TestDockerWithoutImageNamesTheFix(t *testing.T) {
	t.Setenv(sandbox.EnvImagePrefix, "distlock-sandbox-test-absent")
	ctx := testCtx(t, time.Minute)
	g, err := sandbox.Start(ctx, sandbox.Spec{Kind: sandbox.Etcd, Provider: sandbox.ProviderDocker})
	if err == nil {
		// The official image is present locally: nothing to check.
		g.Close()
		t.Skipf("%s is present locally", sandbox.OfficialImage(sandbox.Etcd))
	}
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "make images") {
		t.Errorf("err = %v, want it to name the fix", err)
	}
	t.Logf("docker without image: %v", err)
}

func TestAutoFallsBackToLocal(t *testing.T) {
	// An image that does not exist locally: auto mode must not pull it.
	t.Setenv(sandbox.ImageEnv(sandbox.Redis), "distlock-sandbox-test-absent/redis:none")
	ctx := testCtx(t, time.Minute)
	g, err := sandbox.Start(ctx, sandbox.Spec{Kind: sandbox.Redis, Provider: sandbox.ProviderAuto})
	if errors.Is(err, sandbox.ErrUnavailable) {
		t.Skipf("neither provider can run redis here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Provider() != sandbox.ProviderLocal {
		t.Errorf("provider = %s, want local", g.Provider())
	}
	if err := g.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestLocalWithoutProgramNamesTheFix(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := sandbox.Start(context.Background(), sandbox.Spec{Kind: sandbox.Etcd, Provider: sandbox.ProviderLocal})
	if err == nil {
		t.Skip("etcd found outside PATH")
	}
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "install-servers.sh") {
		t.Fatalf("err = %v, want ErrUnavailable naming scripts/install-servers.sh", err)
	}
}

func TestLocalEtcdBinMustBeAProgram(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "etcd")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{notExec, filepath.Join(t.TempDir(), "missing"), t.TempDir()} {
		t.Setenv(sandbox.EnvEtcdBin, bin)
		_, err := sandbox.Start(context.Background(), sandbox.Spec{Kind: sandbox.Etcd, Provider: sandbox.ProviderLocal})
		if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), sandbox.EnvEtcdBin+"="+bin) {
			t.Errorf("%s=%s: err = %v, want ErrUnavailable naming the variable and its value", sandbox.EnvEtcdBin, bin, err)
		}
	}
}
