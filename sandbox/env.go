package sandbox

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// Environment variables read by the sandbox.
const (
	// EnvProvider selects the provider: "auto" (default), "docker", "local".
	EnvProvider = "DISTLOCK_SANDBOX"
	// EnvImagePrefix is the name prefix of the substitute images built by
	// scripts/build-images.sh (default "distlock-local").
	EnvImagePrefix = "DISTLOCK_LOCAL_IMAGE_PREFIX"
	// EnvEtcdBin is the etcd binary the local provider runs instead of the
	// etcd found in PATH, e.g. one built from the Go module:
	// go build -o /tmp/etcd go.etcd.io/etcd/server/v3
	EnvEtcdBin = "DISTLOCK_ETCD_BIN"
)

// imageEnv is the variable overriding each kind's image.
var imageEnv = map[Kind]string{
	Redis:     "DISTLOCK_IMAGE_REDIS",
	MariaDB:   "DISTLOCK_IMAGE_MARIADB",
	ZooKeeper: "DISTLOCK_IMAGE_ZOOKEEPER",
	Etcd:      "DISTLOCK_IMAGE_ETCD",
	Postgres:  "DISTLOCK_IMAGE_POSTGRES",
}

// officialImage is each kind's default image.
var officialImage = map[Kind]string{
	Redis:     "redis:7",
	MariaDB:   "mariadb:11",
	ZooKeeper: "zookeeper:3.9",
	Etcd:      "gcr.io/etcd-development/etcd:v3.5.17",
	Postgres:  "postgres:15",
}

// ImageEnv returns the environment variable that overrides kind's image,
// e.g. "DISTLOCK_IMAGE_REDIS".
func ImageEnv(kind Kind) string { return imageEnv[kind] }

// OfficialImage returns the image the docker provider prefers for kind.
func OfficialImage(kind Kind) string { return officialImage[kind] }

// SubstituteImage returns the local image scripts/build-images.sh builds for
// kind, e.g. "distlock-local/redis:latest".
func SubstituteImage(kind Kind) string {
	prefix := os.Getenv(EnvImagePrefix)
	if prefix == "" {
		prefix = "distlock-local"
	}
	return prefix + "/" + string(kind) + ":latest"
}

// ProviderSetting returns the provider asked for by spec.Provider, else
// DISTLOCK_SANDBOX, else "auto"; an unknown value is an error.
func ProviderSetting(spec Spec) (string, error) {
	v := spec.Provider
	if v == "" {
		v = strings.TrimSpace(os.Getenv(EnvProvider))
	}
	switch strings.ToLower(v) {
	case "", ProviderAuto:
		return ProviderAuto, nil
	case ProviderDocker:
		return ProviderDocker, nil
	case ProviderLocal:
		return ProviderLocal, nil
	}
	return "", fmt.Errorf("sandbox: unknown provider %q (%s or Spec.Provider: want auto, docker or local)", v, EnvProvider)
}

// chooseProvider returns the provider for spec. In auto mode docker wins
// when an engine answers and an image for the kind exists locally; local
// wins otherwise. The error wraps ErrUnavailable when nothing can run spec.
func chooseProvider(ctx context.Context, spec Spec) (provider, error) {
	setting, err := ProviderSetting(spec)
	if err != nil {
		return nil, err
	}
	switch setting {
	case ProviderLocal:
		return newLocalProvider(spec.Kind)
	case ProviderDocker:
		return newDockerProvider(ctx, spec)
	}
	d, derr := newDockerProvider(ctx, spec)
	if derr == nil {
		return d, nil
	}
	l, lerr := newLocalProvider(spec.Kind)
	if lerr == nil {
		spec.Logf("sandbox: auto: not using docker: %v", derr)
		return l, nil
	}
	return nil, fmt.Errorf("sandbox: auto: no provider can start %s:\n  docker: %w\n  local: %w", spec.Kind, derr, lerr)
}
