package fn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
)

// tlsSecret is the control-plane TLS Secret llm-tls, with or without each
// key.
func tlsSecret(crt, key bool) obj {
	data := obj{}
	if crt {
		data["tls.crt"] = "Y2VydA=="
	}
	if key {
		data["tls.key"] = "a2V5"
	}
	return obj{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
		"metadata": obj{"name": "llm-tls", "namespace": "modelplane-system", "resourceVersion": "7"}, "data": data}
}

// tlsPair makes a self-signed certificate for llm.example.com and its key,
// PEM-encoded.
func tlsPair(t *testing.T) (crtPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "llm.example.com"}, DNSNames: []string{"llm.example.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})
}

// tlsSecretOf is the control-plane TLS Secret llm-tls holding crtPEM and
// keyPEM.
func tlsSecretOf(crtPEM, keyPEM []byte) obj {
	s := tlsSecret(true, true)
	s["data"] = obj{"tls.crt": base64.StdEncoding.EncodeToString(crtPEM), "tls.key": base64.StdEncoding.EncodeToString(keyPEM)}
	return s
}

// observedTLSGateway is a rolled-out TLS gateway; delivered says whether
// the TLS Secret's Object carries its references and is synced.
func observedTLSGateway(delivered bool) map[string]obj {
	o := observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true)
	o["https-redirect-route"] = object("https-redirect-route", plainManifest("HTTPRoute"), true, true)
	sec := object("tls-secret-llm-tls", plainManifest("Secret"), true, true)
	if delivered {
		sec["spec"].(obj)["references"] = []any{obj{"patchesFrom": obj{"apiVersion": "v1", "kind": "Secret", "name": "llm-tls", "namespace": "modelplane-system", "fieldPath": "data[tls.crt]"}, "toFieldPath": "data[tls.crt]"}}
	}
	o["tls-secret-llm-tls"] = sec
	return o
}

// TestTLSSecrets covers the TLS Secrets copied from the control plane: a
// missing or incomplete Secret makes GatewayReady False with
// TLSSecretMissing and keeps what was composed; a present one is copied by
// reference, never by value.
func TestTLSSecrets(t *testing.T) {
	crt, key := tlsPair(t)
	_, otherKey := tlsPair(t)
	cases := map[string]struct {
		reason   string
		observed map[string]obj
		required map[string][]obj
		// wantReason of GatewayReady, and a part of its message.
		wantReason, message string
		// composed: the TLS Secret's Object is desired; references: with them.
		composed, references bool
		// carried: its manifest is the observed one, not a new version.
		carried bool
	}{
		"Missing": {
			reason:     "The Secret is not on the control plane: TLSSecretMissing names it, the composed copy is carried forward.",
			observed:   observedTLSGateway(true),
			required:   map[string][]obj{"tls-secret-llm-tls": {}},
			wantReason: "TLSSecretMissing", message: `the TLS Secret "llm-tls" does not exist in "modelplane-system"`,
			composed: true, references: true,
		},
		"MissingNeverComposed": {
			reason:     "The Secret is not on the control plane and was never composed: nothing to carry.",
			observed:   observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true),
			required:   map[string][]obj{"tls-secret-llm-tls": {}},
			wantReason: "TLSSecretMissing", message: "does not exist",
		},
		"NoKey": {
			reason:     "The Secret has a certificate but no key.",
			observed:   observedTLSGateway(true),
			required:   map[string][]obj{"tls-secret-llm-tls": {tlsSecret(true, false)}},
			wantReason: "TLSSecretMissing", message: "has no tls.key",
			composed: true, references: true,
		},
		"FirstComposition": {
			reason:     "The Secret exists; its Object is created without references first.",
			observed:   observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true),
			required:   map[string][]obj{"tls-secret-llm-tls": {tlsSecret(true, true)}},
			wantReason: "TLSSecretMissing", message: "has not reached the gateway cluster yet",
			composed: true,
		},
		"KeyOfAnotherCertificate": {
			reason: "The Secret's key is not its certificate's: Envoy Gateway would program the listener and Envoy refuse the pair, " +
				"so TLSSecretMissing says so and the copy delivered before is carried forward, not replaced.",
			observed:   observedTLSGateway(true),
			required:   map[string][]obj{"tls-secret-llm-tls": {tlsSecretOf(crt, otherKey)}},
			wantReason: "TLSSecretMissing", message: `the TLS Secret "llm-tls" in "modelplane-system" on the control plane holds a tls.key that is not the key of the certificate in tls.crt`,
			composed: true, references: true, carried: true,
		},
		"KeyOfItsCertificate": {
			reason:     "A certificate and its own key: Serving.",
			observed:   observedTLSGateway(true),
			required:   map[string][]obj{"tls-secret-llm-tls": {tlsSecretOf(crt, key)}},
			wantReason: "Serving",
			composed:   true, references: true,
		},
		"Delivered": {
			reason:     "The copy has its references and is synced: Serving.",
			observed:   observedTLSGateway(true),
			required:   map[string][]obj{"tls-secret-llm-tls": {tlsSecret(true, true)}},
			wantReason: "Serving",
			composed:   true, references: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, newRequest(t, gatewayXR(tlsSpec), tc.observed, tc.required))
			c := condition(rsp, "GatewayReady")
			if c.GetReason() != tc.wantReason || !strings.Contains(c.GetMessage(), tc.message) {
				t.Errorf("%s\nGatewayReady is %s: %q, want %s containing %q", tc.reason, c.GetReason(), c.GetMessage(), tc.wantReason, tc.message)
			}
			d, ok := rsp.GetDesired().GetResources()["tls-secret-llm-tls"]
			if ok != tc.composed {
				t.Fatalf("%s\ntls-secret-llm-tls desired: %t, want %t", tc.reason, ok, tc.composed)
			}
			if !ok {
				return
			}
			o := d.GetResource().AsMap()
			_, refs := o["spec"].(obj)["references"]
			if refs != tc.references {
				t.Errorf("%s\ntls-secret-llm-tls has references: %t, want %t", tc.reason, refs, tc.references)
			}
			if tc.carried {
				want := tc.observed["tls-secret-llm-tls"]["spec"].(obj)["forProvider"].(obj)["manifest"]
				if diff := cmp.Diff(want, o["spec"].(obj)["forProvider"].(obj)["manifest"]); diff != "" {
					t.Errorf("%s\ntls-secret-llm-tls is not the copy composed before: -observed, +desired:\n%s", tc.reason, diff)
				}
			}
			if s := d.GetResource().String(); strings.Contains(s, "Y2VydA==") || strings.Contains(s, "a2V5") || strings.Contains(s, base64.StdEncoding.EncodeToString(otherKey)) {
				t.Errorf("%s\nthe desired TLS Secret Object carries key material: %s", tc.reason, s)
			}
		})
	}
}

// TestTLSSecretManifest checks the copy of a present Secret, with its
// references, in full.
func TestTLSSecretManifest(t *testing.T) {
	rsp := run(t, newRequest(t, gatewayXR(tlsSpec), observedTLSGateway(true), map[string][]obj{"tls-secret-llm-tls": {tlsSecret(true, true)}}))
	o := rsp.GetDesired().GetResources()["tls-secret-llm-tls"].GetResource().AsMap()
	want := obj{
		"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
		"metadata": obj{"name": "llm-tls", "namespace": "modelplane-system", "annotations": obj{"modelplane.ai/secret-version": "7"}},
		"data":     obj{"tls.crt": "", "tls.key": ""},
	}
	if diff := cmp.Diff(want, o["spec"].(obj)["forProvider"].(obj)["manifest"]); diff != "" {
		t.Errorf("TLS Secret manifest: -want, +got:\n%s", diff)
	}
	wantRefs := []any{
		obj{"patchesFrom": obj{"apiVersion": "v1", "kind": "Secret", "name": "llm-tls", "namespace": "modelplane-system", "fieldPath": "data[tls.crt]"}, "toFieldPath": "data[tls.crt]"},
		obj{"patchesFrom": obj{"apiVersion": "v1", "kind": "Secret", "name": "llm-tls", "namespace": "modelplane-system", "fieldPath": "data[tls.key]"}, "toFieldPath": "data[tls.key]"},
	}
	if diff := cmp.Diff(wantRefs, o["spec"].(obj)["references"]); diff != "" {
		t.Errorf("TLS Secret references: -want, +got:\n%s", diff)
	}
	if rq := rsp.GetRequirements().GetResources()["tls-secret-llm-tls"]; rq.GetMatchName() != "llm-tls" || rq.GetNamespace() != "modelplane-system" || rq.GetKind() != "Secret" {
		t.Errorf("requirement for the TLS Secret: %v", rq)
	}
}

// TestTLSRenewal walks a certificate renewal over several reconciles, with
// Crossplane and provider-kubernetes acting in between: a new version of
// the TLS Secret is on its way while the old one still serves, so
// GatewayReady stays True and a Normal result says what is being
// delivered; only a first delivery holds GatewayReady.
func TestTLSRenewal(t *testing.T) {
	const copyName = "tls-secret-llm-tls"
	const renewal = `SEVERITY_NORMAL: a new version of the TLS Secret "llm-tls" (resourceVersion 8) is being delivered to the gateway cluster; the https listener serves the version delivered before (resourceVersion 7) until it arrives`
	secretAt := func(rv string) map[string][]obj {
		s := tlsSecret(true, true)
		s["metadata"].(obj)["resourceVersion"] = rv
		return map[string][]obj{copyName: {s}}
	}
	step := func(name string, observed map[string]obj, required map[string][]obj, wantCondition string, wantNotice bool) *fnv1.RunFunctionResponse {
		t.Helper()
		rsp := run(t, newRequest(t, gatewayXR(tlsSpec), observed, required))
		if got := summarize(rsp).Conditions[0]; got != wantCondition {
			t.Errorf("%s: GatewayReady is %s (%s), want %s", name, got, condition(rsp, "GatewayReady").GetMessage(), wantCondition)
		}
		if got := slices.Contains(results(rsp), renewal); got != wantNotice {
			t.Errorf("%s: renewal notice present: %t, want %t; results: %q", name, got, wantNotice, results(rsp))
		}
		if got, want := rsp.GetDesired().GetResources()[copyName].GetReady().String(), "READY_TRUE"; got != want && wantCondition == "GatewayReady=STATUS_CONDITION_TRUE/Serving" {
			t.Errorf("%s: the TLS Secret's copy is %s while it serves, want %s", name, got, want)
		}
		return rsp
	}

	// Reconcile 1: the copy of version 7 is delivered.
	observed := observedTLSGateway(false)
	rsp := run(t, newRequest(t, gatewayXR(tlsSpec), observed, secretAt("7")))
	observed[copyName] = providerSyncs(t, applyDesired(t, observed[copyName], rsp, copyName))
	step("reconcile 1, version 7 delivered", observed, secretAt("7"), "GatewayReady=STATUS_CONDITION_TRUE/Serving", false)

	// The Secret is renewed on the control plane: version 8.
	rsp = step("reconcile 2, version 8 seen", observed, secretAt("8"), "GatewayReady=STATUS_CONDITION_TRUE/Serving", false)
	if v := manifest(rsp, copyName)["metadata"].(obj)["annotations"].(obj)["modelplane.ai/secret-version"]; v != "8" {
		t.Fatalf("the copy asks for version %v, want 8", v)
	}
	// Crossplane applies the new spec; provider-kubernetes has not synced
	// it yet: the live Secret is still version 7.
	observed[copyName] = applyDesired(t, observed[copyName], rsp, copyName)
	rsp = step("reconcile 3, version 8 in flight", observed, secretAt("8"), "GatewayReady=STATUS_CONDITION_TRUE/Serving", true)
	// provider-kubernetes syncs it.
	observed[copyName] = providerSyncs(t, applyDesired(t, observed[copyName], rsp, copyName))
	step("reconcile 4, version 8 delivered", observed, secretAt("8"), "GatewayReady=STATUS_CONDITION_TRUE/Serving", false)
}

// TestTLSFirstDeliveryHolds: a copy that never delivered values holds
// GatewayReady with TLSSecretMissing through every step of its first
// delivery: created without references, the placeholder Secret created,
// the references applied but not synced; then Serving.
func TestTLSFirstDeliveryHolds(t *testing.T) {
	const copyName = "tls-secret-llm-tls"
	required := map[string][]obj{copyName: {tlsSecret(true, true)}}
	observed := observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true)
	observed["https-redirect-route"] = object("https-redirect-route", plainManifest("HTTPRoute"), true, true)
	steps := []struct {
		name string
		want string
		// then is what Crossplane and the provider do after the reconcile.
		then func(rsp *fnv1.RunFunctionResponse)
	}{
		{"no copy", "TLSSecretMissing", func(rsp *fnv1.RunFunctionResponse) { observed[copyName] = applyDesired(t, nil, rsp, copyName) }},
		{"copy created, not reported", "TLSSecretMissing", func(*fnv1.RunFunctionResponse) { observed[copyName] = providerSyncs(t, observed[copyName]) }},
		{"placeholder Secret created", "TLSSecretMissing", func(rsp *fnv1.RunFunctionResponse) {
			observed[copyName] = applyDesired(t, observed[copyName], rsp, copyName)
		}},
		{"references applied, not synced", "TLSSecretMissing", func(*fnv1.RunFunctionResponse) { observed[copyName] = providerSyncs(t, observed[copyName]) }},
		{"delivered", "Serving", nil},
	}
	for _, st := range steps {
		rsp := run(t, newRequest(t, gatewayXR(tlsSpec), observed, required))
		if got := condition(rsp, "GatewayReady").GetReason(); got != st.want {
			t.Errorf("%s: GatewayReady reason %s (%s), want %s", st.name, got, condition(rsp, "GatewayReady").GetMessage(), st.want)
		}
		if st.then != nil {
			st.then(rsp)
		}
	}
}

// TestTLSSecretNamesReserved: a TLS certificateRef whose copy in the gateway
// namespace would take the name of one of the function's own Secrets there
// (the client certificate's, its CA's copy, a caller Secret's copy, or any
// name of the callers' copies' form) is Fatal, naming the field and the
// Secret it would collide with; nothing changes.
func TestTLSSecretNamesReserved(t *testing.T) {
	longCaller := "team-" + strings.Repeat("x", 60)
	spec := func(name string) obj {
		return obj{"providerConfigName": "gpu-cluster-1", "hostname": "llm.example.com", "tls": obj{"certificateRefs": []any{obj{"name": "llm-tls"}, obj{"name": name}}},
			"auth": obj{"method": "APIKey", "apiKey": obj{"secretSelector": obj{"matchLabels": obj{"modelplane.ai/callers": "true"}}}}}
	}
	required := map[string][]obj{"caller-secrets": {callerSecret(longCaller, "1", obj{"ci": "a2V5"})}}
	cases := map[string]struct {
		name string
		want string
	}{
		"Allowed":           {name: "inference-gateway-tls"},
		"ClientCA":          {name: "inference-gateway-client-ca", want: `spec.tls.certificateRefs[1].name "inference-gateway-client-ca" is a name the function uses for its own Secrets in the gateway namespace "modelplane-system" (the copy of the client certificate's CA)`},
		"ClientCertificate": {name: "inference-gateway-client-certificate", want: `(the Secret cert-manager writes the gateway's client certificate into)`},
		"CallersForm":       {name: "inference-gateway-callers-platform", want: `(in the form inference-gateway-callers-<Secret> of the callers' Secrets' copies)`},
		"CallerCopyHashed":  {name: names.CallerSecret("inference-gateway", longCaller), want: `(the copy of the callers' Secret "` + longCaller + `")`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := newRequest(t, gatewayXR(spec(tc.name)), nil, required)
			rsp := run(t, req)
			var fatal string
			for _, r := range rsp.GetResults() {
				if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
					fatal = r.GetMessage()
				}
			}
			if tc.want == "" {
				if fatal != "" {
					t.Errorf("Fatal for an allowed name: %s", fatal)
				}
				return
			}
			if !strings.Contains(fatal, tc.want) {
				t.Errorf("Fatal %q, want it to contain %q", fatal, tc.want)
			}
			if len(rsp.GetDesired().GetResources()) != 0 {
				t.Errorf("a Fatal desired %d resources", len(rsp.GetDesired().GetResources()))
			}
		})
	}
}
