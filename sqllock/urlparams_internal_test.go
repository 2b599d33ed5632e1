package sqllock

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/urltest"
)

var mysqlURLParser = urltest.Parser{
	Base:      "mysql://u:p@127.0.0.1:3306/db",
	Schemes:   []string{"mysql"},
	Durations: []string{"lock_wait_timeout", "dial_timeout"},
	Ints:      []string{"sessions", "waiters"},
	Others:    []string{"table", "create_table", "tls", "tls_ca", "mode"},
	Parse: func(u *backend.URL) error {
		cfg, _, err := configFromURL(u)
		if err == nil && strings.HasPrefix(cfg.TLSConfig, tlsPrefix) {
			mysql.DeregisterTLSConfig(cfg.TLSConfig)
		}
		return err
	},
}

var pgURLParser = urltest.Parser{
	Base:      "postgres://u:p@127.0.0.1:5432/db",
	Schemes:   []string{"postgres", "postgresql"},
	Durations: []string{"lock_wait_timeout", "dial_timeout"},
	Ints:      []string{"sessions", "waiters"},
	Others:    []string{"table", "create_table", "mode", "sslmode", "sslrootcert", "sslcert", "sslkey", "application_name"},
	Parse:     func(u *backend.URL) error { _, _, err := pgConfigFromURL(u); return err },
}

// Issue 27, item 6: every number parameter refuses NaN, infinities,
// exponents, negative, zero and overflowing values, naming itself.
func TestURLNumbers(t *testing.T) {
	t.Run("mysql", func(t *testing.T) { urltest.CheckNumbers(t, mysqlURLParser) })
	t.Run("postgres", func(t *testing.T) { urltest.CheckNumbers(t, pgURLParser) })
}

// Issue 27, item 7: no parameter's error shows a value Redacted hides
// (sslmode was hidden by Redacted and echoed by its error).
func TestURLHiddenValues(t *testing.T) {
	t.Run("mysql", func(t *testing.T) { urltest.CheckHidden(t, mysqlURLParser) })
	t.Run("postgres", func(t *testing.T) { urltest.CheckHidden(t, pgURLParser) })
}

func FuzzURLParamsMySQL(f *testing.F)    { urltest.Fuzz(f, mysqlURLParser) }
func FuzzURLParamsPostgres(f *testing.F) { urltest.Fuzz(f, pgURLParser) }

// lock_wait_timeout above the server's maximum (PostgreSQL's is INT_MAX
// ms, under MaxParamDuration) is refused by the URL, naming the parameter
// (it was refused later by New, naming the Go option LockWaitTimeout).
func TestURLLockWaitAboveServerMax(t *testing.T) {
	u, err := backend.ParseURL(pgURLParser.Base + "?lock_wait_timeout=600h")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = pgConfigFromURL(u)
	if !errors.Is(err, backend.ErrInvalidConfig) || !strings.Contains(fmt.Sprint(err), `parameter lock_wait_timeout="600h": want at most`) {
		t.Errorf("lock_wait_timeout=600h: %v, want ErrInvalidConfig naming the parameter", err)
	}
}

// A file name with a space reaches pgx as that name: pgx reads '+' in a
// query value as itself, and url.Values.Encode wrote the space as '+'.
func TestURLPostgresFileNameWithSpace(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "urltest CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "a b")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	u, err := backend.ParseURL(pgURLParser.Base + "?sslmode=verify-full&sslrootcert=" + url.QueryEscape(ca))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := pgConfigFromURL(u); err != nil {
		t.Errorf("sslrootcert=%q: %v", ca, err)
	}
}

// TestURLSessionMode: mode=session, sessions and waiters reach Options
// on both schemes; a MySQL mode other than row or session is refused.
func TestURLSessionMode(t *testing.T) {
	u, err := backend.ParseURL("mysql://u:p@127.0.0.1:3306/db?mode=session&sessions=3&waiters=5")
	if err != nil {
		t.Fatal(err)
	}
	if _, o, err := configFromURL(u); err != nil || !o.Session || o.Sessions != 3 || o.Waiters != 5 {
		t.Errorf("mysql mode=session: %+v, %v", o, err)
	}
	u, err = backend.ParseURL("postgres://u:p@127.0.0.1:5432/db?mode=session&sessions=4")
	if err != nil {
		t.Fatal(err)
	}
	if _, o, err := pgConfigFromURL(u); err != nil || !o.Session || o.Advisory || o.Sessions != 4 {
		t.Errorf("postgres mode=session: %+v, %v", o, err)
	}
	u, err = backend.ParseURL("mysql://u:p@127.0.0.1:3306/db?mode=advisory")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := configFromURL(u); !errors.Is(err, backend.ErrInvalidConfig) || !strings.Contains(err.Error(), "mode") {
		t.Errorf("mysql mode=advisory: %v, want ErrInvalidConfig naming mode", err)
	}
}
