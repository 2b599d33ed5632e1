package sandbox_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/distlock/distlock/sandbox"
)

// Unit tests of the parts that need no server.

func TestSpecErrors(t *testing.T) {
	for _, tc := range []struct {
		spec sandbox.Spec
		want string
	}{
		{sandbox.Spec{}, "Kind is required"},
		{sandbox.Spec{Kind: "cassandra"}, `unknown kind "cassandra"`},
		{sandbox.Spec{Kind: sandbox.Redis, Nodes: -1}, "negative"},
		{sandbox.Spec{Kind: sandbox.Etcd, Topology: sandbox.Cluster}, "only for redis"},
		{sandbox.Spec{Kind: sandbox.Redis, Topology: "ring"}, `unknown topology "ring"`},
		{sandbox.Spec{Kind: sandbox.Redis, Topology: sandbox.Cluster, Nodes: 2}, "at least 3"},
		{sandbox.Spec{Kind: sandbox.Redis, Topology: sandbox.Replica, Nodes: 1}, "at least 2"},
		{sandbox.Spec{Kind: sandbox.Redis, Nodes: 10}, "more than"},
		{sandbox.Spec{Kind: sandbox.Redis, Provider: "podman"}, `unknown provider "podman"`},
		{sandbox.Spec{Kind: sandbox.Redis, MariaDBTLS: &sandbox.ServerTLS{}}, "MariaDBTLS is only for mariadb"},
		{sandbox.Spec{Kind: sandbox.MariaDB, MariaDBTLS: &sandbox.ServerTLS{CA: os.Args[0]}}, "MariaDBTLS.Cert is empty"},
		{sandbox.Spec{Kind: sandbox.MariaDB, MariaDBTLS: &sandbox.ServerTLS{CA: "/nonexistent/ca.pem", Cert: "c", Key: "k"}}, "MariaDBTLS.CA"},
	} {
		_, err := sandbox.Start(context.Background(), tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Start(%+v) = %v, want an error containing %q", tc.spec, err, tc.want)
		}
	}
}

func TestProviderSetting(t *testing.T) {
	t.Setenv(sandbox.EnvProvider, "")
	if got, _ := sandbox.ProviderSetting(sandbox.Spec{}); got != sandbox.ProviderAuto {
		t.Errorf("default = %q, want auto", got)
	}
	t.Setenv(sandbox.EnvProvider, "Local")
	if got, _ := sandbox.ProviderSetting(sandbox.Spec{}); got != sandbox.ProviderLocal {
		t.Errorf("env Local = %q, want local", got)
	}
	if got, _ := sandbox.ProviderSetting(sandbox.Spec{Provider: "docker"}); got != sandbox.ProviderDocker {
		t.Errorf("Spec.Provider docker = %q, want docker (over the env)", got)
	}
}

func TestImageNames(t *testing.T) {
	t.Setenv(sandbox.EnvImagePrefix, "")
	if got := sandbox.SubstituteImage(sandbox.Redis); got != "distlock-local/redis:latest" {
		t.Errorf("SubstituteImage = %q", got)
	}
	t.Setenv(sandbox.EnvImagePrefix, "ci")
	if got := sandbox.SubstituteImage(sandbox.Etcd); got != "ci/etcd:latest" {
		t.Errorf("SubstituteImage with prefix = %q", got)
	}
	for _, k := range sandbox.Kinds() {
		if sandbox.OfficialImage(k) == "" || !strings.HasPrefix(sandbox.ImageEnv(k), "DISTLOCK_IMAGE_") {
			t.Errorf("%s: official image %q, env %q", k, sandbox.OfficialImage(k), sandbox.ImageEnv(k))
		}
	}
}

func TestURLs(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{sandbox.RedisURL("127.0.0.1:1"), "redis://127.0.0.1:1"},
		{sandbox.RedisURL("127.0.0.1:1", "127.0.0.1:2"), "redis://127.0.0.1:1,127.0.0.1:2"},
		{sandbox.MySQLURL("127.0.0.1:3"), "mysql://root:" + sandbox.RootPassword + "@127.0.0.1:3/" + sandbox.Database},
		{sandbox.MySQLDSN("127.0.0.1:3"), "root:" + sandbox.RootPassword + "@tcp(127.0.0.1:3)/" + sandbox.Database + "?parseTime=true&timeout=5s"},
		{sandbox.ZooKeeperURL("127.0.0.1:4", "127.0.0.1:5"), "zk://127.0.0.1:4,127.0.0.1:5"},
		{sandbox.EtcdURL("127.0.0.1:6"), "etcd://127.0.0.1:6"},
		{sandbox.PostgresURL("127.0.0.1:7"), "postgres://postgres:" + sandbox.PostgresPassword + "@127.0.0.1:7/" + sandbox.Database + "?sslmode=disable"},
		{sandbox.PostgresTLSURL("127.0.0.1:7", "/tmp/a b/ca.pem"), "postgres://postgres:" + sandbox.PostgresPassword + "@127.0.0.1:7/" + sandbox.Database + "?sslmode=verify-full&sslrootcert=%2Ftmp%2Fa+b%2Fca.pem"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
