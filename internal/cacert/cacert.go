// Package cacert reads CA certificates that the function publishes where
// anyone may read them: an InferenceGateway's status, or a ConfigMap on the
// gateway cluster. What it returns holds certificates only, each parsed as
// X.509 and encoded again, never the bytes it was given: a PEM file that
// bundles a certificate with its private key, or a Secret whose two keys
// are swapped, must not publish the key.
package cacert

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
)

// MaxPEM is the longest PEM text a CA's certificates are published as: the
// XRD's maxLength of status.backendTLS.caCertificate. A Kubernetes
// ConfigMap holds far more, but one limit for both keeps the rule simple,
// and a CA bundle of 64 KiB is already some hundred certificates.
const MaxPEM = 65536

// blockCertificate is the PEM type of an X.509 certificate (RFC 7468).
const blockCertificate = "CERTIFICATE"

// Certificates returns the X.509 certificates in data, a PEM text, encoded
// again as PEM: nothing else of data. Its error says what is wrong
// without quoting data: no certificate, a block that is not a certificate
// (a private key is named as one), a certificate that does not parse, or
// more than MaxPEM bytes once encoded. Text between blocks, such as
// openssl's human-readable dump, is dropped.
func Certificates(data []byte) (string, error) {
	var out bytes.Buffer
	n := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		n++
		if b.Type != blockCertificate {
			if isPrivateKey(b.Type) {
				return "", fmt.Errorf("its PEM block %d is a private key, not a certificate", n)
			}
			return "", fmt.Errorf("its PEM block %d is a %s, not a certificate", n, b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return "", fmt.Errorf("its PEM block %d is not an X.509 certificate that parses", n)
		}
		// Headers are dropped: a certificate block has none (RFC 7468).
		_ = pem.Encode(&out, &pem.Block{Type: blockCertificate, Bytes: c.Raw})
	}
	if n == 0 {
		return "", fmt.Errorf("it holds no PEM certificate")
	}
	if out.Len() > MaxPEM {
		return "", fmt.Errorf("its certificates are %d bytes as PEM, more than the %d bytes that can be published", out.Len(), MaxPEM)
	}
	return out.String(), nil
}

// isPrivateKey reports whether a PEM type is a private key's: PKCS#8
// ("PRIVATE KEY", "ENCRYPTED PRIVATE KEY"), PKCS#1 ("RSA PRIVATE KEY"),
// SEC 1 ("EC PRIVATE KEY"), and the like.
func isPrivateKey(typ string) bool {
	return strings.HasSuffix(typ, "PRIVATE KEY")
}

// MatchesKey reports whether keyPEM is a private key, in a format Envoy
// Gateway and cert-manager read (PKCS#1, PKCS#8, SEC 1), whose public key
// is the one certPEM's first certificate carries. Its error says what is
// wrong without quoting either.
func MatchesKey(certPEM string, keyPEM []byte) error {
	cb, _ := pem.Decode([]byte(certPEM))
	if cb == nil || cb.Type != blockCertificate {
		return fmt.Errorf("it holds no certificate")
	}
	c, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return fmt.Errorf("its certificate does not parse")
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return fmt.Errorf("its key is not PEM")
	}
	key, err := parsePrivateKey(kb)
	if err != nil {
		return err
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(c.PublicKey) {
		return fmt.Errorf("its key is not the key of its certificate")
	}
	return nil
}

// parsePrivateKey parses a private key block of the formats MatchesKey
// takes.
func parsePrivateKey(b *pem.Block) (crypto.Signer, error) {
	var k any
	var err error
	switch b.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(b.Bytes)
	default:
		return nil, fmt.Errorf("its key is a PEM %s block, not a private key", b.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("its key (%s) does not parse", b.Type)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("its key (%s) is of a kind that cannot sign", b.Type)
	}
	return s, nil
}
