package backend

import (
	"crypto/tls"
	"crypto/x509"
	"os"
)

// TLS reads the TLS parameters shared by the backends whose secure scheme
// is a scheme of its own (rediss://, etcds://): tls_ca (a PEM file of the
// CAs to verify the server with; default the system's), tls_cert and
// tls_key (a client certificate and its key, together), tls_server_name
// (the name to verify instead of the host's) and tls_insecure_skip_verify.
// It returns nil when secure is false (and records an error if any of them
// is set, naming secureScheme), else the configuration, with the files
// read. Problems are recorded in p, like every parameter's.
func (p *Params) TLS(secure bool, secureScheme string) *tls.Config {
	ca := p.String("tls_ca", "")
	cert := p.String("tls_cert", "")
	key := p.String("tls_key", "")
	name := p.String("tls_server_name", "")
	skip := p.Bool("tls_insecure_skip_verify", false)
	if !secure {
		if ca != "" || cert != "" || key != "" || name != "" || skip {
			p.Fail("tls_* parameters need the %s:// scheme", secureScheme)
		}
		return nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: name, InsecureSkipVerify: skip}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		c.RootCAs = x509.NewCertPool()
		switch {
		case err != nil:
			p.Fail("parameter tls_ca: %v", err)
		case !c.RootCAs.AppendCertsFromPEM(pem):
			p.Fail("parameter tls_ca=%q: no PEM certificate in it", ca)
		}
	}
	switch {
	case (cert == "") != (key == ""):
		p.Fail("parameters tls_cert and tls_key go together")
	case cert != "":
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			p.Fail("parameters tls_cert/tls_key: %v", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c
}
