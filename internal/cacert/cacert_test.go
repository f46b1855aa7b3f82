package cacert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// newCA makes a self-signed CA: its certificate and key as PEM.
func newCA(t *testing.T, cn string) (crt, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}))
}

func TestCertificates(t *testing.T) {
	crt, key := newCA(t, "ca")
	crt2, _ := newCA(t, "ca2")
	// A bundle of many certificates, over the limit once encoded.
	big := strings.Repeat(crt, MaxPEM/len(crt)+1)
	cases := map[string]struct {
		data    string
		want    string
		wantErr string
	}{
		"One":              {data: crt, want: crt},
		"Two":              {data: crt + crt2, want: crt + crt2},
		"TextAround":       {data: "Certificate:\n  Data: ...\n" + crt + "trailing text\n", want: crt},
		"CRLF":             {data: strings.ReplaceAll(crt, "\n", "\r\n"), want: crt},
		"BundledWithKey":   {data: crt + key, wantErr: "its PEM block 2 is a private key, not a certificate"},
		"KeyOnly":          {data: key, wantErr: "its PEM block 1 is a private key, not a certificate"},
		"RSAKey":           {data: "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n", wantErr: "its PEM block 1 is a private key, not a certificate"},
		"OtherBlock":       {data: "-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n", wantErr: "its PEM block 1 is a X509 CRL, not a certificate"},
		"Garbled":          {data: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", wantErr: "its PEM block 1 is not an X.509 certificate that parses"},
		"NotPEM":           {data: "hello", wantErr: "it holds no PEM certificate"},
		"Empty":            {data: "", wantErr: "it holds no PEM certificate"},
		"OverTheLimit":     {data: big, wantErr: "more than the 65536 bytes that can be published"},
		"AtTheLimitOrLess": {data: strings.Repeat(crt, MaxPEM/len(crt)), want: strings.Repeat(crt, MaxPEM/len(crt))},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Certificates([]byte(tc.data))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Certificates(): -want, +got:\n%s", diff)
			}
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if tc.wantErr == "" && gotErr != "" || !strings.Contains(gotErr, tc.wantErr) {
				t.Errorf("Certificates() error: want %q, got %q", tc.wantErr, gotErr)
			}
			// Whatever it says, it never quotes the key.
			if strings.Contains(got+gotErr, strings.Split(key, "\n")[1]) {
				t.Errorf("Certificates() quotes the private key")
			}
		})
	}
}

func TestMatchesKey(t *testing.T) {
	crt, key := newCA(t, "ca")
	_, other := newCA(t, "other")
	cases := map[string]struct {
		crt, key string
		wantErr  string
	}{
		"Matches":     {crt: crt, key: key},
		"OtherKey":    {crt: crt, key: other, wantErr: "its key is not the key of its certificate"},
		"Swapped":     {crt: key, key: crt, wantErr: "it holds no certificate"},
		"KeyNotPEM":   {crt: crt, key: "x", wantErr: "its key is not PEM"},
		"KeyIsCert":   {crt: crt, key: crt, wantErr: "its key is a PEM CERTIFICATE block, not a private key"},
		"KeyGarbled":  {crt: crt, key: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", wantErr: "its key (PRIVATE KEY) does not parse"},
		"CertGarbled": {crt: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", key: key, wantErr: "its certificate does not parse"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := MatchesKey(tc.crt, []byte(tc.key))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, got); diff != "" {
				t.Errorf("MatchesKey(): -want, +got:\n%s", diff)
			}
		})
	}
}
