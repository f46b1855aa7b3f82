package controlplane

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/route"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

var (
	gvrCertificate   = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
	gvrIssuer        = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "issuers"}
	gvrClusterIssuer = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "clusterissuers"}
)

// The names the suite expects, written out (docs/mtls.md).
const (
	mtlsPage           = "docs/mtls.md"
	mtlsSection        = "Set it up" // the page's how-to, which TestMutualTLS follows
	mtlsBackend        = "vllm"
	mtlsHost           = "qwen3-8b.ml-team.svc.cluster.local"          // its hostname in docs/mtls.md, the SNI
	clientCertName     = harness.GatewayXRName + "-client-certificate" // the Certificate and its Secret
	clientCAIssuerName = harness.GatewayXRName + "-client-ca"          // the Issuer, and the CA's copy
)

// mtlsShape is what TestMutualTLS runs of each step of docs/mtls.md's
// "Set it up", by the languages of its blocks.
var mtlsShape = map[int][]string{
	1: {"sh"},
	2: {"yaml"},
	3: {"yaml"},
	4: {"sh"},
}

// TestMutualTLSBlocks checks, without a control plane, that docs/mtls.md's
// "Set it up" still has the blocks TestMutualTLS follows.
func TestMutualTLSBlocks(t *testing.T) {
	steps := readSection(t, mtlsPage, mtlsSection)
	got := map[int][]string{}
	for n := range mtlsShape {
		for _, b := range steps[n] {
			got[n] = append(got[n], b.lang)
		}
	}
	if diff := cmp.Diff(mtlsShape, got); diff != "" {
		t.Errorf("%s's %q has steps with other code blocks than TestMutualTLS follows: -want, +got:\n%s", mtlsPage, mtlsSection, diff)
	}
}

// TestMutualTLS follows the README's Quick start, steps 3 and 4, then
// docs/mtls.md's "Set it up" as written, on a control plane of its own where
// cert-manager's real controllers run beside Envoy Gateway and AI Gateway.
// It checks that cert-manager issues the gateway's client certificate from
// the CA the reader keeps on the control plane, that the InferenceGateway
// publishes that CA's certificate and never its key, that Envoy Gateway
// accepts the backend, and, in the xDS of our Gateway, that the mTLS
// backend's endpoints are told to present the issued certificate and to
// verify the backend by its own CA, while the third-party backend keeps the
// system CAs. Then it renews the certificate as `cmctl renew` does, and
// switches the gateway to a ClusterIssuer of the user's, and requires each
// new certificate in the xDS with no condition leaving True.
func TestMutualTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole control plane")
	}
	qs, ms := readQuickStart(t), readSection(t, mtlsPage, mtlsSection)
	sc := bringUpWith(t, upOptions{readerCreatesTeamNamespace: true, certManager: true})
	r := newReader(t, sc)
	for _, n := range []int{3, 4} {
		r.follow(t, "the Quick start", n, qs[n])
	}
	// The page's steps continue a serving Quick start.
	sc.eventually(t, waitSettle, "GatewayReady=True after the Quick start", func(ctx context.Context) string {
		return wantCondition(sc.gatewayXR(ctx), gateway.ConditionType, "True")
	})
	sc.eventually(t, waitRoute, "RoutingReady=True after the Quick start", func(ctx context.Context) string {
		return wantCondition(sc.routeXR(ctx), route.ConditionType, "True")
	})

	// What the reader has before step 1: the CA key pair that will sign
	// the gateway's client certificates, and the certificate of the CA
	// that signed the vLLM server's.
	clientCA := newLongCA(t, "gateway client CA")
	backendCA := newLongCA(t, "vLLM server CA")
	harness.WriteFile(t, filepath.Join(r.dir, "client-ca.crt"), clientCA.certPEM)
	harness.WriteFile(t, filepath.Join(r.dir, "client-ca.key"), clientCA.keyPEM)
	harness.WriteFile(t, filepath.Join(r.dir, "vllm-ca.crt"), backendCA.certPEM)
	sc.w.Forbid("the key of the gateway's client CA", base64.StdEncoding.EncodeToString(clientCA.keyPEM))

	start := time.Now()
	for _, n := range []int{1, 2, 3} {
		r.follow(t, mtlsPage, n, ms[n])
	}
	sc.eventually(t, waitSettle, "cert-manager to issue the gateway's client certificate", func(ctx context.Context) string {
		return wantCondition(sc.certificate(ctx), "Ready", "True")
	})
	t.Logf("cert-manager issued the client certificate %s after step 1", time.Since(start).Round(100*time.Millisecond))
	issued := sc.issuedClientCert(t, clientCA)
	sc.w.Forbid("the key of the gateway's client certificate", issued.keyB64)
	sc.eventually(t, waitSettle, "GatewayReady=True with the client certificate", func(ctx context.Context) string {
		return wantCondition(sc.gatewayXR(ctx), gateway.ConditionType, "True")
	})
	sc.eventually(t, waitRoute, "RoutingReady=True with the mTLS backend", func(ctx context.Context) string {
		if s := wantCondition(sc.routeXR(ctx), route.ConditionType, "True"); s != "" {
			return s
		}
		return sc.backendAccepted(ctx, harness.RouteName+"-"+mtlsBackend)
	})
	t.Logf("GatewayReady and RoutingReady True, Envoy Gateway accepted the Backend %s-%s, %s after step 1", harness.RouteName, mtlsBackend, time.Since(start).Round(100*time.Millisecond))
	gw, rt := sc.w.Transitions()
	t.Logf("GatewayReady since step 1:\n%s\nRoutingReady since step 1:\n%s", harness.FormatTransitions(start, since(gw, start)), harness.FormatTransitions(start, since(rt, start)))
	sc.checkEnvoyProxyPresents(t)

	// Step 4: the CA certificate the backend owner is given.
	r.follow(t, mtlsPage, 4, ms[4])
	got, err := os.ReadFile(filepath.Join(r.dir, "gateway-client-ca.crt"))
	harness.Must(t, err)
	if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(clientCA.certPEM)) {
		t.Errorf("step 4 wrote gateway-client-ca.crt:\n%s\nwant the client CA's certificate:\n%s", got, clientCA.certPEM)
	}

	sc.readXDS(t, "scenario-mtls", checkMutualTLS(harness.RouteName+"-"+mtlsBackend, harness.RouteName+"-"+harness.KeyedBackend, backendCA.certPEM, issued.certPEM))

	// A renewal: the Certificate's Issuing=True condition, which is what
	// `cmctl renew` sets (cmctl is a module of its own, not run here). In
	// cert-manager v1.21.2 the trigger controller does nothing to a
	// Certificate already Issuing, and the key manager and request manager
	// act on it (pkg/controller/certificates/trigger, keymanager,
	// requestmanager). Nothing may leave True while the new certificate
	// reaches Envoy.
	renewal := time.Now()
	sc.renewCertificate(t)
	var renewed issuedCert
	sc.eventually(t, waitSettle, "cert-manager to renew the client certificate", func(ctx context.Context) string {
		renewed = sc.issuedClientCert(t, clientCA)
		if renewed.serial == issued.serial {
			return "the Secret still holds the first certificate, serial " + issued.serial
		}
		return ""
	})
	sc.w.Forbid("the key of the renewed client certificate", renewed.keyB64)
	t.Logf("cert-manager renewed the client certificate %s after the request", time.Since(renewal).Round(100*time.Millisecond))
	sc.readXDS(t, "scenario-mtls-renewed", checkMutualTLS(harness.RouteName+"-"+mtlsBackend, harness.RouteName+"-"+harness.KeyedBackend, backendCA.certPEM, renewed.certPEM))
	t.Logf("Envoy is told the renewed certificate %s after the request", time.Since(renewal).Round(100*time.Millisecond))
	sc.noFalseSince(t, renewal, "the renewal")

	// An issuer the user runs on the gateway cluster instead: a
	// ClusterIssuer of type CA. cert-manager reissues from it: the issued
	// Secret's issuer annotations no longer match the Certificate's
	// issuerRef (cert-manager v1.21.2
	// internal/controller/certificates/policies/checks.go,
	// SecretIssuerAnnotationsMismatch, one of the trigger controller's
	// policies); the previous certificate serves meanwhile, so
	// nothing leaves True, and the CA the function cannot see is no longer
	// published.
	corpCA := newLongCA(t, "corp CA")
	switched := time.Now()
	sc.switchToClusterIssuer(t, corpCA)
	var reissued issuedCert
	sc.eventually(t, waitSettle, "cert-manager to reissue the client certificate from the ClusterIssuer", func(ctx context.Context) string {
		c, err := sc.clientCertBy(ctx, corpCA)
		if err != nil {
			return err.Error()
		}
		reissued = c
		return ""
	})
	sc.w.Forbid("the key of the certificate issued by the ClusterIssuer", reissued.keyB64)
	t.Logf("cert-manager reissued the client certificate from the ClusterIssuer %s after the switch", time.Since(switched).Round(100*time.Millisecond))
	sc.readXDS(t, "scenario-mtls-cluster-issuer", checkMutualTLS(harness.RouteName+"-"+mtlsBackend, harness.RouteName+"-"+harness.KeyedBackend, backendCA.certPEM, reissued.certPEM))
	sc.eventually(t, waitSettle, "status.backendTLS without the CA certificate, and no CA Issuer left", func(ctx context.Context) string {
		gw := sc.gatewayXR(ctx)
		if gw == nil {
			return "no InferenceGateway"
		}
		if ca, _, _ := unstructured.NestedString(gw.Object, "status", "backendTLS", "caCertificate"); ca != "" {
			return "status.backendTLS.caCertificate still holds the previous CA"
		}
		if _, err := sc.get(ctx, gvrIssuer, harness.GatewayNS, clientCAIssuerName); err == nil {
			return "the CA Issuer of caSecretRef is still on the gateway cluster"
		}
		return ""
	})
	sc.noFalseSince(t, switched, "the switch to a ClusterIssuer")

	sc.noSecretsInObjects(t, "after mutual TLS")
	sc.noKeyInLogs(t, clientCA.keyPEM, issued.keyPEM, renewed.keyPEM, corpCA.keyPEM, reissued.keyPEM)
	sc.w.Check(t)
	obs, viol := sc.w.SidecarSummary()
	t.Logf("sidecar invariant: %d observations, %d violations", obs, viol)
	if s := sc.w.SidecarUnexercised(); s != "" {
		t.Error(s)
	}
}

// longCA is a CA key pair as a user keeps one: valid for years, its key
// PEM-encoded for a kubernetes.io/tls Secret.
type longCA struct {
	certPEM, keyPEM []byte
	cert            *x509.Certificate
}

func newLongCA(tb testing.TB, cn string) longCA {
	tb.Helper()
	key := harness.NewKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber:          harness.Serial(tb),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("cannot create the %s: %v", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	harness.Must(tb, err)
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	harness.Must(tb, err)
	return longCA{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}),
		cert:    cert,
	}
}

// certificate returns the gateway's client Certificate on the gateway
// cluster, or nil.
func (sc *scenarios) certificate(ctx context.Context) *unstructured.Unstructured {
	u, err := sc.get(ctx, gvrCertificate, harness.GatewayNS, clientCertName)
	if err != nil {
		return nil
	}
	return u
}

// issuedCert is the certificate cert-manager wrote into the client
// certificate's Secret.
type issuedCert struct {
	certPEM []byte
	serial  string
	keyB64  string
	keyPEM  []byte
}

// switchToClusterIssuer puts ca into a ClusterIssuer of type CA on the
// gateway cluster, its Secret in cert-manager's cluster resource namespace,
// waits for cert-manager to call it Ready, and points the InferenceGateway's
// client certificate at it instead of caSecretRef.
func (sc *scenarios) switchToClusterIssuer(t *testing.T, ca longCA) {
	t.Helper()
	sc.c.Namespace(sc.ctx, "cert-manager")
	sc.c.Apply(sc.ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
		"metadata": map[string]any{"name": "corp-ca", "namespace": "cert-manager"},
		"data": map[string]any{
			"tls.crt": base64.StdEncoding.EncodeToString(ca.certPEM),
			"tls.key": base64.StdEncoding.EncodeToString(ca.keyPEM),
		},
	}}, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer",
		"metadata": map[string]any{"name": "corp-ca"},
		"spec":     map[string]any{"ca": map[string]any{"secretName": "corp-ca"}},
	}})
	sc.w.Forbid("the key of the corp CA", base64.StdEncoding.EncodeToString(ca.keyPEM))
	sc.eventually(t, waitSettle, "the ClusterIssuer corp-ca Ready", func(ctx context.Context) string {
		u, err := sc.c.Dyn.Resource(gvrClusterIssuer).Get(ctx, "corp-ca", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return wantCondition(u, "Ready", "True")
	})
	sc.patchGateway(t, `{"spec":{"backendTLS":{"clientCertificate":{"caSecretRef":null,"issuerRef":{"name":"corp-ca","kind":"ClusterIssuer"}}}}}`)
}

// clientCertBy returns the issued certificate once the one in the Secret
// is a client certificate of ca.
func (sc *scenarios) clientCertBy(ctx context.Context, ca longCA) (issuedCert, error) {
	s, err := sc.get(ctx, harness.GVRSecret, harness.GatewayNS, clientCertName)
	if err != nil {
		return issuedCert{}, fmt.Errorf("cannot read the issued Secret: %w", err)
	}
	return verifyIssued(s, ca)
}

// issuedClientCert reads the issued Secret on the gateway cluster and
// checks that the certificate is a client certificate signed by ca, the
// reader's CA: cert-manager's CA Issuer signed it, not something else.
func (sc *scenarios) issuedClientCert(t *testing.T, ca longCA) issuedCert {
	t.Helper()
	s, err := sc.get(sc.ctx, harness.GVRSecret, harness.GatewayNS, clientCertName)
	if err != nil {
		t.Fatalf("cannot read the issued Secret %s/%s: %v", harness.GatewayNS, clientCertName, err)
	}
	c, err := verifyIssued(s, ca)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// verifyIssued reads an issued Secret and requires its certificate to be a
// client certificate of ca.
func verifyIssued(s *unstructured.Unstructured, ca longCA) (issuedCert, error) {
	data, _, _ := unstructured.NestedStringMap(s.Object, "data")
	crt, err := base64.StdEncoding.DecodeString(data["tls.crt"])
	if err != nil {
		return issuedCert{}, fmt.Errorf("cannot decode the issued tls.crt: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(data["tls.key"])
	if err != nil {
		return issuedCert{}, fmt.Errorf("cannot decode the issued tls.key: %w", err)
	}
	b, _ := pem.Decode(crt)
	if b == nil || len(key) == 0 {
		return issuedCert{}, fmt.Errorf("the issued Secret %s/%s has no certificate or no key", s.GetNamespace(), s.GetName())
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return issuedCert{}, fmt.Errorf("cannot parse the issued certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return issuedCert{}, fmt.Errorf("the issued certificate (%s, issuer %s) is not a client certificate of the CA %s: %w", cert.Subject, cert.Issuer, ca.cert.Subject, err)
	}
	return issuedCert{certPEM: pem.EncodeToMemory(b), serial: cert.SerialNumber.String(), keyB64: data["tls.key"], keyPEM: key}, nil
}

// backendAccepted says what keeps Envoy Gateway from accepting a Backend
// of the team's namespace, or "".
func (sc *scenarios) backendAccepted(ctx context.Context, name string) string {
	u, err := sc.get(ctx, harness.GVRBackend, names.TeamNamespace(harness.TeamControlNS), name)
	if err != nil {
		return fmt.Sprintf("Backend %s: %v", name, err)
	}
	if s := wantCondition(u, "Accepted", "True"); s != "" {
		return "Backend " + name + ": " + s
	}
	return ""
}

// checkEnvoyProxyPresents requires the EnvoyProxy to hand every TLS
// backend the issued certificate's Secret.
func (sc *scenarios) checkEnvoyProxyPresents(t *testing.T) {
	t.Helper()
	ep, err := sc.get(sc.ctx, harness.GVREnvoyProxy, harness.GatewayNS, harness.GatewayXRName)
	harness.Must(t, err)
	ref, _, _ := unstructured.NestedMap(ep.Object, "spec", "backendTLS", "clientCertificateRef")
	if ref["name"] != clientCertName {
		t.Errorf("the EnvoyProxy's spec.backendTLS.clientCertificateRef is %v, want the Secret %s", ref, clientCertName)
	}
}

// renewCertificate asks cert-manager to renew the client certificate now.
func (sc *scenarios) renewCertificate(t *testing.T) {
	t.Helper()
	u := sc.certificate(sc.ctx)
	if u == nil {
		t.Fatal("cannot find the client Certificate to renew")
	}
	harness.SetCondition(u, map[string]any{
		"type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
		"message": "Certificate re-issuance manually triggered", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	})
	if _, err := sc.c.Dyn.Resource(gvrCertificate).Namespace(harness.GatewayNS).UpdateStatus(sc.ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("cannot set the Certificate's Issuing condition: %v", err)
	}
}

// noFalseSince fails the test for any GatewayReady or RoutingReady
// transition away from True the world recorded since start. The window
// ends now: a replay of Crossplane's still pending is waited out first
// (harness/replay.go), and checked here if it stands as the verdict.
func (sc *scenarios) noFalseSince(t *testing.T, start time.Time, what string) {
	t.Helper()
	sc.w.AwaitReplays(sc.ctx, time.Now())
	gw, _ := sc.w.Transitions()
	for _, tr := range gw {
		if tr.At.After(start) && tr.Status != "True" {
			t.Errorf("%s: GatewayReady went %s (%s) at %s: %s", what, tr.Status, tr.Reason, tr.At.Format("15:04:05.000"), tr.Message)
		}
	}
	for r, ts := range sc.w.AllRouteTransitions() {
		failed := false
		for _, tr := range ts {
			if tr.At.After(start) && tr.Status != "True" {
				t.Errorf("%s: ModelRoute %s went RoutingReady=%s (%s) at %s: %s", what, r, tr.Status, tr.Reason, tr.At.Format("15:04:05.000"), tr.Message)
				failed = true
			}
		}
		if failed {
			// What came just before tells a flicker from a step that had
			// not settled when this one began.
			from := start.Add(-30 * time.Second)
			t.Logf("%s: seconds from %s, GatewayReady:\n%sRoutingReady of %s:\n%s", what, start.Format("15:04:05.000"),
				harness.FormatTransitions(start, since(gw, from)), r, harness.FormatTransitions(start, since(ts, from)))
		}
	}
}

// noKeyInLogs requires that no private key appears, PEM or base64, in the
// log of the function, Crossplane or provider-kubernetes.
func (sc *scenarios) noKeyInLogs(t *testing.T, keys ...[]byte) {
	t.Helper()
	for _, name := range []string{"function", "crossplane", "provider-kubernetes"} {
		b, err := os.ReadFile(filepath.Join(sc.c.Procs.LogDir, name+".log"))
		if err != nil {
			t.Errorf("cannot read the %s log: %v", name, err)
			continue
		}
		for i, k := range keys {
			body := pemBody(k)
			if bytes.Contains(b, k) || bytes.Contains(b, []byte(base64.StdEncoding.EncodeToString(k))) || (body != "" && bytes.Contains(b, []byte(body))) {
				t.Errorf("the %s log holds private key %d", name, i+1)
			}
		}
	}
}

// pemBody is the first line of a PEM block's base64 body: a key logged
// with its newlines escaped still holds it.
func pemBody(p []byte) string {
	lines := strings.Split(string(p), "\n")
	if len(lines) < 2 {
		return ""
	}
	return lines[1]
}

// checkMutualTLS: in the model's cluster, the endpoints of the mTLS
// Backend are told, through their transport socket match, to present the
// issued client certificate and to verify the server against the backend's
// own CA with the backend's hostname as SNI; the third-party Backend's
// endpoints verify against the system CAs and never the backend's CA.
func checkMutualTLS(mtlsBackend, otherBackend string, backendCA, clientCert []byte) func(xdsDump) string {
	return func(d xdsDump) string {
		m := d.tlsContextOf(mtlsBackend)
		if m == nil {
			return fmt.Sprintf("no cluster has endpoints of the Backend %s with a TLS transport socket", mtlsBackend)
		}
		ctx, _ := m["common_tls_context"].(map[string]any)
		if sni, _ := m["sni"].(string); sni != mtlsHost {
			return fmt.Sprintf("the TLS context of %s sets the SNI %q, want %q", mtlsBackend, sni, mtlsHost)
		}
		certs, _ := ctx["tls_certificate_sds_secret_configs"].([]any)
		if len(certs) != 1 {
			return fmt.Sprintf("the TLS context of %s names %d client certificates, want 1: %v", mtlsBackend, len(certs), ctx)
		}
		certSecret := d.secretNamed(str(certs[0], "name"))
		chain := d.inlineBytes(certSecret, "tls_certificate", "certificate_chain")
		if !bytes.Equal(bytes.TrimSpace(chain), bytes.TrimSpace(clientCert)) {
			return fmt.Sprintf("the client certificate Envoy presents to %s (secret %q) is not the one cert-manager issued last", mtlsBackend, str(certs[0], "name"))
		}
		if tc, _ := certSecret["tls_certificate"].(map[string]any); tc["private_key"] != "<redacted>" {
			return fmt.Sprintf("the client certificate's key is %v in the dump, want it redacted", tc["private_key"])
		}
		ca := d.validationCA(ctx)
		if !bytes.Equal(bytes.TrimSpace(ca), bytes.TrimSpace(backendCA)) {
			return fmt.Sprintf("%s is verified against %q, want the backend's own CA", mtlsBackend, ca)
		}
		o := d.tlsContextOf(otherBackend)
		if o == nil {
			return fmt.Sprintf("no TLS transport socket for the third-party Backend %s", otherBackend)
		}
		octx, _ := o["common_tls_context"].(map[string]any)
		if bytes.Contains(d.validationCA(octx), pemBodyBytes(backendCA)) {
			return fmt.Sprintf("the third-party Backend %s is verified against the mTLS backend's CA", otherBackend)
		}
		if f := d.validationFile(octx); f == "" {
			return fmt.Sprintf("the third-party Backend %s is not verified against the system CAs: %v", otherBackend, octx)
		}
		return ""
	}
}

func pemBodyBytes(p []byte) []byte { return []byte(pemBody(p)) }

// str is a map's string field, "" when absent.
func str(v any, key string) string {
	m, _ := v.(map[string]any)
	s, _ := m[key].(string)
	return s
}

// tlsContextOf returns the UpstreamTlsContext of the transport socket
// match that a Backend's endpoints select: Envoy Gateway puts all the
// backends of a rule into one cluster, a locality each, and gives each
// locality's endpoints the name of their TLS settings in
// envoy.transport_socket_match metadata (gateway v1.8.3
// internal/xds/translator/cluster.go, buildXdsClusterLoadAssignment and
// buildXdsCluster).
func (d xdsDump) tlsContextOf(backend string) map[string]any {
	for _, c := range d["clusters"] {
		la, _ := c["load_assignment"].(map[string]any)
		eps, _ := la["endpoints"].([]any)
		for _, e := range eps {
			if !localityOfBackend(e, backend) {
				continue
			}
			lbs, _ := e.(map[string]any)["lb_endpoints"].([]any)
			for _, lb := range lbs {
				md, _ := lb.(map[string]any)["metadata"].(map[string]any)
				fm, _ := md["filter_metadata"].(map[string]any)
				name := str(fm["envoy.transport_socket_match"], "name")
				if name == "" {
					continue
				}
				ms, _ := c["transport_socket_matches"].([]any)
				for _, m := range ms {
					if str(m, "name") != name {
						continue
					}
					ts, _ := m.(map[string]any)["transport_socket"].(map[string]any)
					tc, _ := ts["typed_config"].(map[string]any)
					return tc
				}
			}
		}
	}
	return nil
}

// localityOfBackend: the locality's Envoy Gateway metadata names the
// Backend.
func localityOfBackend(e any, backend string) bool {
	md, _ := e.(map[string]any)["metadata"].(map[string]any)
	fm, _ := md["filter_metadata"].(map[string]any)
	eg, _ := fm["envoy-gateway"].(map[string]any)
	rs, _ := eg["resources"].([]any)
	for _, r := range rs {
		if str(r, "kind") == "Backend" && str(r, "name") == backend {
			return true
		}
	}
	return false
}

// secretNamed returns the SDS secret of that name.
func (d xdsDump) secretNamed(name string) map[string]any {
	for _, s := range d["secrets"] {
		if s["name"] == name {
			return s
		}
	}
	return nil
}

// inlineBytes decodes the DataSource at path of v: protojson writes bytes
// in base64.
func (d xdsDump) inlineBytes(v map[string]any, path ...string) []byte {
	s := d.inlineString(v, path...)
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil
	}
	return b
}

// inlineString is the DataSource at path of v as written: inline_bytes or
// inline_string.
func (d xdsDump) inlineString(v map[string]any, path ...string) string {
	m := v
	for _, p := range path {
		m, _ = m[p].(map[string]any)
	}
	if s, ok := m["inline_bytes"].(string); ok {
		return s
	}
	s, _ := m["inline_string"].(string)
	return s
}

// validationContext returns the validation context a common TLS context
// uses: inline, or the SDS secret it names.
func (d xdsDump) validationContext(ctx map[string]any) map[string]any {
	if vc, ok := ctx["validation_context"].(map[string]any); ok {
		return vc
	}
	cvc, _ := ctx["combined_validation_context"].(map[string]any)
	name := str(cvc["validation_context_sds_secret_config"], "name")
	if name == "" {
		name = str(ctx["validation_context_sds_secret_config"], "name")
	}
	s := d.secretNamed(name)
	vc, _ := s["validation_context"].(map[string]any)
	return vc
}

// validationCA is the trusted CA a context verifies servers against, when
// given inline.
func (d xdsDump) validationCA(ctx map[string]any) []byte {
	vc := d.validationContext(ctx)
	if vc == nil {
		return nil
	}
	return d.inlineBytes(vc, "trusted_ca")
}

// validationFile is the trusted CA file a context verifies servers
// against: the system CAs.
func (d xdsDump) validationFile(ctx map[string]any) string {
	vc := d.validationContext(ctx)
	ca, _ := vc["trusted_ca"].(map[string]any)
	f, _ := ca["filename"].(string)
	return f
}
