package backend_test

import (
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
)

// TestParamsTLS checks the shared TLS parameters: a configuration with the
// files read on the secure scheme, nil on the plain one, and an error
// naming the parameter for every bad combination or file.
func TestParamsTLS(t *testing.T) {
	certs, err := sandbox.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
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
