package etcdlock_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	_ "github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/sandbox"
)

// TestTLSAndAuth opens etcds:// URLs with a CA file and a user/password
// against an etcd started here with a self-signed certificate and
// authentication on. The sandbox has no TLS option, so this test runs the
// Debian etcd binary itself and is skipped where it is not installed.
func TestTLSAndAuth(t *testing.T) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("etcd binary not installed: the TLS test starts its own server")
	}
	dir := t.TempDir()
	certs, err := sandbox.WriteCerts(dir)
	if err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile := certs.CA, certs.ServerCert, certs.ServerKey
	addr := startTLSEtcd(t, bin, dir, certFile, keyFile)

	pool := x509.NewCertPool()
	pemCA, _ := os.ReadFile(caFile)
	pool.AppendCertsFromPEM(pemCA)
	admin, err := clientv3.New(clientv3.Config{Endpoints: []string{"https://" + addr}, DialTimeout: 10 * time.Second,
		TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := ctxT(t, 30*time.Second)
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "s3cret"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("enabling auth: %v", err)
		}
	}

	withUser := func(userinfo string) string {
		return "etcds://" + userinfo + "@" + addr + "/tls?ttl=2s&dial_timeout=5s&tls_ca=" + url.QueryEscape(caFile)
	}
	l, err := distlock.Open(ctx, withUser("root:s3cret"))
	if err != nil {
		t.Fatalf("Open with TLS and a password: %v", err)
	}
	le, err := l.Acquire(ctx, "tls-key")
	if err != nil {
		t.Fatalf("Acquire over TLS: %v", err)
	}
	if err := le.Release(ctx); err != nil {
		t.Fatalf("Release over TLS: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}

	_, err = distlock.Open(ctx, withUser("root:wrong-pw"))
	if !errors.Is(err, backend.ErrInvalidConfig) {
		t.Fatalf("Open with a wrong password = %v, want ErrInvalidConfig", err)
	}
	if strings.Contains(err.Error(), "wrong-pw") {
		t.Errorf("error shows the password: %v", err)
	}
	t.Logf("wrong password: %v", err)

	_, err = distlock.Open(ctx, "etcds://root:s3cret@"+addr+"/tls?dial_timeout=2s")
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("Open without the CA = %v, want ErrUnavailable (unknown authority)", err)
	}
}

// startTLSEtcd runs an etcd member serving clients over TLS and returns
// its client address; it is killed when the test ends.
func startTLSEtcd(t *testing.T, bin, dir, certFile, keyFile string) string {
	t.Helper()
	client, peer := freePort(t), freePort(t)
	cmd := exec.Command(bin, "--name", "tls", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", "https://"+client, "--advertise-client-urls", "https://"+client,
		"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
		"--initial-cluster", "tls=http://"+peer, "--cert-file", certFile, "--key-file", keyFile)
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", client, time.Second)
		if err == nil {
			c.Close()
			return client
		}
		if time.Now().After(deadline) {
			t.Fatalf("TLS etcd did not start: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
