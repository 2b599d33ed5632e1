package backend_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
)

// testCerts are the PEM files TestParamsTLS loads: a self-signed
// certificate serving as both the CA and the client certificate.
type testCerts struct{ CA, ClientCert, ClientKey string }

// writeTestCerts writes a self-signed certificate and its key into dir.
// Made here, not with the sandbox's WriteCerts, so that this package's
// tests do not pull the sandbox's dependencies (testcontainers, the store
// clients) into the go.sum of every module that imports backend.
func writeTestCerts(t *testing.T, dir string) testCerts {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "distlock backend test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := testCerts{CA: filepath.Join(dir, "ca.pem"), ClientCert: filepath.Join(dir, "ca.pem"), ClientKey: filepath.Join(dir, "key.pem")}
	for name, b := range map[string]*pem.Block{c.CA: {Type: "CERTIFICATE", Bytes: der}, c.ClientKey: {Type: "PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(name, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// TestParamsTLS checks the shared TLS parameters: a configuration with the
// files read on the secure scheme, nil on the plain one, and an error
// naming the parameter for every bad combination or file.
func TestParamsTLS(t *testing.T) {
	certs := writeTestCerts(t, t.TempDir())
	tlsOf := func(raw string) (secure bool, err error) {
		t.Helper()
		u, perr := backend.ParseURL(raw)
		if perr != nil {
			t.Fatalf("ParseURL(%q): %v", raw, perr)
		}
		c := u.Query.TLS(u.Scheme == "xs", "xs")
		if err := u.Query.Err(); err != nil {
			return false, err
		}
		if c != nil && strings.Contains(raw, "tls_ca") && c.RootCAs == nil {
			t.Errorf("%s: tls_ca not loaded", raw)
		}
		if c != nil && strings.Contains(raw, "tls_cert") && len(c.Certificates) != 1 {
			t.Errorf("%s: client certificate not loaded", raw)
		}
		return c != nil, nil
	}
	q := url.QueryEscape
	ok := map[string]bool{
		"x://h":  false,
		"xs://h": true,
		"xs://h?tls_ca=" + q(certs.CA) + "&tls_cert=" + q(certs.ClientCert) + "&tls_key=" + q(certs.ClientKey) + "&tls_server_name=n": true,
	}
	for raw, want := range ok {
		if secure, err := tlsOf(raw); err != nil || secure != want {
			t.Errorf("%s: secure %v, %v; want %v", raw, secure, err, want)
		}
	}
	for raw, want := range map[string]string{
		"x://h?tls_ca=" + q(certs.CA):                                        "need the xs:// scheme",
		"x://h?tls_insecure_skip_verify=true":                                "need the xs:// scheme",
		"xs://h?tls_ca=/does/not/exist":                                      "parameter tls_ca",
		"xs://h?tls_ca=" + q(os.Args[0]):                                     "no PEM certificate",
		"xs://h?tls_cert=" + q(certs.ClientCert):                             "tls_cert and tls_key go together",
		"xs://h?tls_cert=" + q(certs.ClientCert) + "&tls_key=" + q(certs.CA): "tls_cert/tls_key",
	} {
		_, err := tlsOf(raw)
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, backend.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig naming %q", raw, err, want)
		}
	}
}
