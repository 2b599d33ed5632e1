package sandbox

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// TLSFiles names the PEM files of a group started with [Spec.TLS]. They
// live on this host in a temporary directory that Close removes.
type TLSFiles struct {
	// CA is the certificate of the throwaway authority that signed the
	// servers' and the client's certificates.
	CA string
	// ClientCert and ClientKey are a client certificate signed by CA (for
	// servers that check client certificates) and its private key.
	ClientCert, ClientKey string
}

// Names of the files in a TLS directory, on the host and in containers.
const (
	tlsCAFile         = "ca.pem"
	tlsServerCertFile = "server.pem"
	tlsServerKeyFile  = "server-key.pem"
	tlsClientCertFile = "client.pem"
	tlsClientKeyFile  = "client-key.pem"
	// tlsServerKeyStoreFile is the server's key and certificate in one PEM
	// file: ZooKeeper's PEM key store.
	tlsServerKeyStoreFile = "server-keystore.pem"
	// tlsContainerDir is where the docker provider copies the files.
	tlsContainerDir = "/distlock-tls"
)

// tlsMaterial is the certificates of one TLS group.
type tlsMaterial struct {
	dir   string   // host directory holding the files
	host  string   // the servers' host as clients reach them
	files TLSFiles // host paths
	pool  *x509.CertPool
	pair  tls.Certificate // the client's
}

// tlsFileNames lists every file of a TLS directory.
func tlsFileNames() []string {
	return []string{tlsCAFile, tlsServerCertFile, tlsServerKeyFile, tlsClientCertFile, tlsClientKeyFile, tlsServerKeyStoreFile}
}

// newTLSMaterial creates a temporary directory with a new CA, a server
// certificate for hosts (IP addresses or DNS names, plus 127.0.0.1, ::1
// and localhost) and a client certificate, valid for a day.
func newTLSMaterial(hosts ...string) (*tlsMaterial, error) {
	dir, err := os.MkdirTemp("", "distlock-sandbox-tls-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: tls: %w", err)
	}
	m, err := writeTLSMaterial(dir, hosts)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("sandbox: tls: %w", err), os.RemoveAll(dir))
	}
	return m, nil
}

func writeTLSMaterial(dir string, hosts []string) (*tlsMaterial, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "distlock sandbox CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	// leaf is the template of a certificate the CA signs, valid as long.
	leaf := func(serial int64, name string, usage ...x509.ExtKeyUsage) *x509.Certificate {
		return &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: name},
			NotBefore:    caTmpl.NotBefore,
			NotAfter:     caTmpl.NotAfter,
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  usage,
		}
	}
	// Redis uses the server certificate as its client certificate for
	// replication and the cluster bus too.
	server := leaf(2, "distlock sandbox server", x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	server.DNSNames = []string{"localhost"}
	server.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			server.IPAddresses = append(server.IPAddresses, ip)
		} else if h != "" {
			server.DNSNames = append(server.DNSNames, h)
		}
	}
	client := leaf(3, "distlock sandbox client", x509.ExtKeyUsageClientAuth)
	if err := writePEM(filepath.Join(dir, tlsCAFile), "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	if err := issue(dir, tlsServerCertFile, tlsServerKeyFile, server, ca, caKey); err != nil {
		return nil, err
	}
	if err := issue(dir, tlsClientCertFile, tlsClientKeyFile, client, ca, caKey); err != nil {
		return nil, err
	}
	if err := concatFiles(filepath.Join(dir, tlsServerKeyStoreFile), filepath.Join(dir, tlsServerKeyFile), filepath.Join(dir, tlsServerCertFile)); err != nil {
		return nil, err
	}
	m := &tlsMaterial{dir: dir, host: "127.0.0.1", pool: x509.NewCertPool(), files: TLSFiles{
		CA:         filepath.Join(dir, tlsCAFile),
		ClientCert: filepath.Join(dir, tlsClientCertFile),
		ClientKey:  filepath.Join(dir, tlsClientKeyFile),
	}}
	if len(hosts) > 0 && hosts[0] != "" {
		m.host = hosts[0]
	}
	m.pool.AddCert(ca)
	if m.pair, err = tls.LoadX509KeyPair(m.files.ClientCert, m.files.ClientKey); err != nil {
		return nil, err
	}
	return m, nil
}

// issue signs tmpl with the CA and writes the certificate and a new key.
func issue(dir, certFile, keyFile string, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, certFile), "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, keyFile), "PRIVATE KEY", keyDER)
}

// writePEM writes one PEM block. Files are world-readable: a server in a
// container may run as another user than the one that copied them in, and
// the keys protect nothing but a throwaway test server.
func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o644)
}

// concatFiles writes the contents of srcs, in order, to dst (world-readable,
// like writePEM's files).
func concatFiles(dst string, srcs ...string) error {
	var all []byte
	for _, src := range srcs {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		all = append(all, b...)
	}
	return os.WriteFile(dst, all, 0o644)
}

// clientConfig returns a new client TLS configuration trusting the CA,
// presenting the client certificate and verifying the servers' host.
func (m *tlsMaterial) clientConfig() *tls.Config {
	if m == nil {
		return nil
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: m.pool, Certificates: []tls.Certificate{m.pair}, ServerName: m.host}
}

func (m *tlsMaterial) remove() error {
	if m == nil {
		return nil
	}
	return os.RemoveAll(m.dir)
}

// redisTLSArgs are the TLS settings of a Redis server whose files are in
// dir (a slash-separated path, local or in a container): TLS on port, no plaintext port, client certificates optional (but
// checked when presented), TLS for replication and the cluster bus.
func redisTLSArgs(dir string, port int) []string {
	return []string{
		"--port", "0", "--tls-port", fmt.Sprint(port),
		"--tls-cert-file", path.Join(dir, tlsServerCertFile),
		"--tls-key-file", path.Join(dir, tlsServerKeyFile),
		"--tls-ca-cert-file", path.Join(dir, tlsCAFile),
		"--tls-auth-clients", "optional",
		"--tls-replication", "yes",
		"--tls-cluster", "yes",
	}
}

// CertFiles are the PEM files [WriteCerts] makes.
type CertFiles struct {
	CA                    string // the throwaway authority's certificate
	ServerCert, ServerKey string // for 127.0.0.1, ::1, localhost and the hosts given
	ClientCert, ClientKey string // a client certificate
}

// WriteCerts writes into dir a new throwaway CA, a server certificate for
// 127.0.0.1, ::1, localhost and hosts (IP addresses or DNS names), and a
// client certificate, all signed by that CA and valid for a day: for tests
// of TLS setups the sandbox does not make itself (a server a test starts,
// [ServerTLS], or a CA that must not be trusted).
func WriteCerts(dir string, hosts ...string) (CertFiles, error) {
	m, err := writeTLSMaterial(dir, hosts)
	if err != nil {
		return CertFiles{}, fmt.Errorf("sandbox: certificates in %s: %w", dir, err)
	}
	return CertFiles{
		CA:         m.files.CA,
		ServerCert: filepath.Join(dir, tlsServerCertFile),
		ServerKey:  filepath.Join(dir, tlsServerKeyFile),
		ClientCert: m.files.ClientCert,
		ClientKey:  m.files.ClientKey,
	}, nil
}

// zkSecureClientPort is the TLS client port of ZooKeeper in a container.
const zkSecureClientPort = 2281

// zookeeperTLSSettings are the zoo.cfg lines of a ZooKeeper serving TLS
// on its secureClientPort with the files in dir (a slash-separated path,
// local or in a container): the Netty connection factory (the only one
// with TLS), PEM key and trust stores (ZooKeeper 3.6+), client
// certificates optional but checked when presented. Keys ZooKeeper does
// not know in zoo.cfg become "zookeeper."-prefixed system properties,
// which is where it reads the ssl.* settings.
func zookeeperTLSSettings(dir string) []string {
	return []string{
		"serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
		"ssl.keyStore.location=" + path.Join(dir, tlsServerKeyStoreFile),
		"ssl.keyStore.type=PEM",
		"ssl.trustStore.location=" + path.Join(dir, tlsCAFile),
		"ssl.trustStore.type=PEM",
		"ssl.clientAuth=want",
	}
}

// zkTLSJVMFlags puts Debian's Netty jars on the boot class path of a
// ZooKeeper serving TLS: the manifest of Debian's zookeeper.jar (3.8.0)
// names netty-handler but not netty-codec, which its SSL handler needs
// (NoClassDefFoundError: io/netty/handler/codec/ByteToMessageDecoder at the
// first TLS connection). The boot class path reaches the local java and
// the substitute image alike, through JVMFLAGS, without rebuilding the
// image; all of Netty goes there so that it is loaded by one class loader.
// Entries that do not exist (the official image keeps its jars elsewhere)
// are ignored by the JVM.
var zkTLSJVMFlags = "-Xbootclasspath/a:" + strings.Join([]string{
	"/usr/share/java/netty-common.jar",
	"/usr/share/java/netty-buffer.jar",
	"/usr/share/java/netty-resolver.jar",
	"/usr/share/java/netty-transport.jar",
	"/usr/share/java/netty-transport-native-unix-common.jar",
	"/usr/share/java/netty-transport-native-epoll.jar",
	"/usr/share/java/netty-codec.jar",
	"/usr/share/java/netty-handler.jar",
}, ":")
