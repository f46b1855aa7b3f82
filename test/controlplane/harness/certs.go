package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ca is a certificate authority made at test time. Every TLS endpoint of
// the control plane is signed by it, so every client verifies its server
// and nothing skips verification.
type ca struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newCA(tb testing.TB) *ca {
	tb.Helper()
	key := NewKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber:          Serial(tb),
		Subject:               pkix.Name{CommonName: "control-plane test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("cannot create the test CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatalf("cannot parse the test CA: %v", err)
	}
	return &ca{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// KeyPair is a PEM certificate and key signed by a ca.
type KeyPair struct {
	CertPEM, KeyPEM []byte // the certificate and its private key, PEM-encoded
}

// server issues a serving certificate for 127.0.0.1 and localhost. gRPC
// clients of a dns:///127.0.0.1:PORT target, like Crossplane calling a
// function, check the IP SAN.
func (c *ca) server(tb testing.TB, cn string, dnsNames ...string) KeyPair {
	return c.issue(tb, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		DNSNames:    append([]string{"localhost"}, dnsNames...),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// client issues a client certificate, such as Crossplane's for mTLS to
// functions.
func (c *ca) client(tb testing.TB, cn string) KeyPair {
	return c.issue(tb, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (c *ca) issue(tb testing.TB, tmpl *x509.Certificate) KeyPair {
	tb.Helper()
	key := NewKey(tb)
	tmpl.SerialNumber = Serial(tb)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		tb.Fatalf("cannot issue a certificate for %s: %v", tmpl.Subject.CommonName, err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatalf("cannot encode the key for %s: %v", tmpl.Subject.CommonName, err)
	}
	return KeyPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}),
	}
}

// writeDir writes ca.crt, tls.crt and tls.key into dir: the names
// Crossplane's --tls-client-certs-dir, the function SDK's
// --tls-certs-dir and controller-runtime's webhook CertDir all read.
func (c *ca) writeDir(tb testing.TB, dir string, kp KeyPair) string {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tb.Fatalf("cannot create %s: %v", dir, err)
	}
	WriteFile(tb, filepath.Join(dir, "ca.crt"), c.certPEM)
	WriteFile(tb, filepath.Join(dir, "tls.crt"), kp.CertPEM)
	WriteFile(tb, filepath.Join(dir, "tls.key"), kp.KeyPEM)
	return dir
}

// serviceAccountKeys writes an RSA key pair for the API server to sign and
// verify service-account tokens with, and returns the paths of the private
// and public key. The controller manager needs those tokens for nothing
// here, but the API server refuses to start without the flags.
func serviceAccountKeys(tb testing.TB, dir string) (private, public string) {
	tb.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatalf("cannot generate the service-account key: %v", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		tb.Fatalf("cannot encode the service-account public key: %v", err)
	}
	private, public = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	WriteFile(tb, private, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	WriteFile(tb, public, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
	return private, public
}

// NewKey returns a new ECDSA P-256 private key.
func NewKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("cannot generate a key: %v", err)
	}
	return key
}

// Serial returns a random certificate serial number.
func Serial(tb testing.TB) *big.Int {
	tb.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		tb.Fatalf("cannot make a serial number: %v", err)
	}
	return n
}

// WriteFile writes b to path, readable by the user alone, or fails the test.
func WriteFile(tb testing.TB, path string, b []byte) {
	tb.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatalf("cannot write %s: %v", path, err)
	}
}
