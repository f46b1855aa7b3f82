package fn

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// Client-certificate fixtures: a gateway whose client certificate comes
// from a ClusterIssuer, and one whose comes from a CA on the control plane.
var (
	issuerClientCertSpec = obj{"providerConfigName": "gpu-cluster-1", "backendTLS": obj{"clientCertificate": obj{
		"issuerRef": obj{"name": "corp-ca", "kind": "ClusterIssuer"},
	}}}
	caClientCertSpec = obj{"providerConfigName": "gpu-cluster-1", "backendTLS": obj{"clientCertificate": obj{
		"caSecretRef": obj{"name": "gateway-client-ca"},
	}}}
)

// clientCASecret is the control-plane CA Secret gateway-client-ca holding
// crtPEM and keyPEM.
func clientCASecret(crtPEM, keyPEM []byte) obj {
	s := tlsSecretOf(crtPEM, keyPEM)
	s["metadata"].(obj)["name"] = "gateway-client-ca"
	return s
}

// certificateManifest is the live Certificate: its Ready condition (nil:
// none yet), and its revision and notAfter once cert-manager has issued
// one (revision 0: never).
func certificateManifest(ready obj, revision int, notAfter string) obj {
	st := obj{}
	if ready != nil {
		st["conditions"] = []any{ready}
	}
	if revision > 0 {
		st["revision"] = revision
		st["notAfter"] = notAfter
	}
	m := plainManifest("Certificate")
	m["status"] = st
	return m
}

// envoyProxyClientCert is the EnvoyProxy's spec.backendTLS in a desired
// response, or nil.
func envoyProxyClientCert(m obj) any {
	spec, _ := m["spec"].(obj)
	return spec["backendTLS"]
}

var clientCertRef = obj{"clientCertificateRef": obj{"name": "inference-gateway-client-certificate"}}

// Readiness of a desired resource, as the response spells it.
var (
	isReady  = fnv1.Ready_READY_TRUE.String()
	notReady = fnv1.Ready_READY_FALSE.String()
)

// TestClientCertificateReadiness covers GatewayReady while the gateway
// waits for its first client certificate, and keeps it through a renewal.
func TestClientCertificateReadiness(t *testing.T) {
	rolled := deploymentManifest(2, 2, true, 2, 2, 2)
	withCert := func(m obj) map[string]obj {
		o := observedGateway("203.0.113.10", true, rolled, true)
		if m != nil {
			o["client-certificate"] = object("client-certificate", m, true, true)
		}
		return o
	}
	cases := map[string]struct {
		reason   string
		observed map[string]obj
		// wantReason of GatewayReady, and a part of its message.
		wantReason, message string
		// backendTLS is the EnvoyProxy's spec.backendTLS.
		backendTLS any
		// notice is a part of a Normal result.
		notice string
		// certReady is the desired Certificate's readiness.
		certReady string
	}{
		"NotObserved": {
			reason:     "The Certificate has not been observed: GatewayReady waits, and the EnvoyProxy names no Secret yet.",
			observed:   withCert(nil),
			wantReason: "ClientCertificateNotReady", message: `the client Certificate "inference-gateway-client-certificate" has not been observed on the gateway cluster yet`,
			certReady: notReady,
		},
		"Issuing": {
			reason:     "cert-manager has not issued the first certificate: its words are quoted.",
			observed:   withCert(certificateManifest(cond("Ready", false, "DoesNotExist", "Issuing certificate as Secret does not exist"), 0, "")),
			wantReason: "ClientCertificateNotReady", message: `cert-manager has not issued the client Certificate "inference-gateway-client-certificate" yet (Ready=False, DoesNotExist: "Issuing certificate as Secret does not exist")`,
			certReady: notReady,
		},
		"Issued": {
			reason:     "The first certificate is issued: Serving, and the EnvoyProxy presents it.",
			observed:   withCert(certificateManifest(cond("Ready", true, "Ready", "Certificate is up to date and has not expired"), 1, "2099-01-01T00:00:00Z")),
			wantReason: "Serving", backendTLS: clientCertRef, certReady: isReady,
		},
		"Renewing": {
			reason:     "A renewal in flight (Ready False, issued before, not expired) holds nothing.",
			observed:   withCert(certificateManifest(cond("Ready", false, "Issuing", "Renewing certificate as renewal was scheduled at 2098-12-01"), 3, "2099-01-01T00:00:00Z")),
			wantReason: "Serving", backendTLS: clientCertRef, certReady: isReady,
			notice: `cert-manager is renewing the client Certificate "inference-gateway-client-certificate"`,
		},
		"Expired": {
			reason:     "The certificate issued before has expired and was not renewed: GatewayReady is False.",
			observed:   withCert(certificateManifest(cond("Ready", false, "Expired", "Certificate expired on 2020-01-01"), 2, "2020-01-01T00:00:00Z")),
			wantReason: "ClientCertificateNotReady", message: "has expired and cert-manager has not renewed it",
			certReady: notReady,
		},
		"ExpiredWhilePresented": {
			reason: "The certificate the EnvoyProxy presents has expired: GatewayReady is False, and the EnvoyProxy keeps naming its Secret, " +
				"into which cert-manager renews, so that nothing flaps.",
			observed: func() map[string]obj {
				o := withCert(certificateManifest(cond("Ready", false, "Expired", "Certificate expired on 2020-01-01"), 2, "2020-01-01T00:00:00Z"))
				o["envoy-proxy"]["spec"].(obj)["forProvider"] = obj{"manifest": obj{"apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "EnvoyProxy", "spec": obj{"backendTLS": clientCertRef}}}
				return o
			}(),
			wantReason: "ClientCertificateNotReady", message: "has expired and cert-manager has not renewed it",
			backendTLS: clientCertRef, certReady: notReady,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, newRequest(t, gatewayXR(issuerClientCertSpec), tc.observed, nil))
			if d := rsp.GetDesired().GetResources()["client-certificate"]; d.GetReady().String() != tc.certReady {
				t.Errorf("%s\nclient-certificate is %s, want %s", tc.reason, d.GetReady(), tc.certReady)
			}
			c := condition(rsp, "GatewayReady")
			if c.GetReason() != tc.wantReason || !strings.Contains(c.GetMessage(), tc.message) {
				t.Errorf("%s\nGatewayReady is %s: %q, want %s containing %q", tc.reason, c.GetReason(), c.GetMessage(), tc.wantReason, tc.message)
			}
			if diff := cmp.Diff(tc.backendTLS, envoyProxyClientCert(manifest(rsp, "envoy-proxy"))); diff != "" {
				t.Errorf("%s\nEnvoyProxy spec.backendTLS: -want, +got:\n%s", tc.reason, diff)
			}
			noticed := tc.notice == ""
			for _, r := range results(rsp) {
				noticed = noticed || strings.HasPrefix(r, "SEVERITY_NORMAL: ") && strings.Contains(r, tc.notice)
			}
			if !noticed {
				t.Errorf("%s\nno Normal result contains %q: %v", tc.reason, tc.notice, results(rsp))
			}
		})
	}
}

// TestClientCertificateManifest checks the Certificate in full, and that a
// gateway without spec.backendTLS composes none of it.
func TestClientCertificateManifest(t *testing.T) {
	rsp := run(t, newRequest(t, gatewayXR(issuerClientCertSpec), observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true), nil))
	want := obj{
		"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
		"metadata": obj{"name": "inference-gateway-client-certificate", "namespace": "modelplane-system"},
		"spec": obj{
			"commonName": "inference-gateway", "duration": "2160h0m0s", "renewBefore": "720h0m0s",
			"secretName": "inference-gateway-client-certificate",
			"issuerRef":  obj{"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"},
			"usages":     []any{"client auth", "digital signature"},
			"privateKey": obj{"algorithm": "ECDSA", "size": float64(256), "rotationPolicy": "Always"},
		},
	}
	if diff := cmp.Diff(want, manifest(rsp, "client-certificate")); diff != "" {
		t.Errorf("Certificate: -want, +got:\n%s", diff)
	}
	for _, n := range []string{"client-ca-secret", "client-issuer"} {
		if _, ok := rsp.GetDesired().GetResources()[n]; ok {
			t.Errorf("%s is desired for a gateway with an issuerRef", n)
		}
	}
	plain := run(t, newRequest(t, gatewayXR(nil), observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true), nil))
	for _, n := range []string{"client-certificate", "client-ca-secret", "client-issuer"} {
		if _, ok := plain.GetDesired().GetResources()[n]; ok {
			t.Errorf("%s is desired for a gateway without spec.backendTLS", n)
		}
	}
	if bt := envoyProxyClientCert(manifest(plain, "envoy-proxy")); bt != nil {
		t.Errorf("EnvoyProxy of a gateway without spec.backendTLS has backendTLS %v", bt)
	}
	if _, ok := status(plain)["backendTLS"]; ok {
		t.Errorf("status.backendTLS of a gateway without spec.backendTLS: %v", status(plain)["backendTLS"])
	}
}

// TestClientCertificateFromCA follows a gateway whose client certificate
// is signed by a CA kept on the control plane over several reconciles,
// provider-kubernetes and cert-manager acting in between: the CA's copy is
// created without references, gets them once the provider has created it,
// the Issuer and Certificate follow, GatewayReady waits for the first
// certificate, and no private key is ever in a desired Object's spec or the
// XR's status, while the CA's certificate is published.
func TestClientCertificateFromCA(t *testing.T) {
	crt, key := tlsPair(t)
	required := map[string][]obj{"client-ca-secret": {clientCASecret(crt, key)}}
	observed := observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true)
	keyB64 := base64.StdEncoding.EncodeToString(key)
	type step struct {
		reason     string
		wantReason string
		// references: the CA copy carries its references.
		references bool
		backendTLS any
	}
	steps := []step{
		{reason: "First reconcile: the CA copy is created without references.", wantReason: "ClientCertificateNotReady"},
		{reason: "The provider created the copy: the references are added.", wantReason: "ClientCertificateNotReady", references: true},
		{reason: "The copy is delivered; cert-manager has not issued yet.", wantReason: "ClientCertificateNotReady", references: true},
		{reason: "cert-manager issued the certificate: Serving, the EnvoyProxy presents it.", wantReason: "Serving", references: true, backendTLS: clientCertRef},
		{reason: "A renewal is in flight: still Serving.", wantReason: "Serving", references: true, backendTLS: clientCertRef},
	}
	for i, s := range steps {
		rsp := run(t, newRequest(t, gatewayXR(caClientCertSpec), observed, required))
		c := condition(rsp, "GatewayReady")
		if c.GetReason() != s.wantReason {
			t.Errorf("step %d: %s\nGatewayReady is %s: %q, want %s", i, s.reason, c.GetReason(), c.GetMessage(), s.wantReason)
		}
		ca := rsp.GetDesired().GetResources()["client-ca-secret"].GetResource().AsMap()
		_, refs := ca["spec"].(obj)["references"]
		if refs != s.references {
			t.Errorf("step %d: %s\nclient-ca-secret has references: %t, want %t", i, s.reason, refs, s.references)
		}
		if diff := cmp.Diff(s.backendTLS, envoyProxyClientCert(manifest(rsp, "envoy-proxy"))); diff != "" {
			t.Errorf("step %d: %s\nEnvoyProxy spec.backendTLS: -want, +got:\n%s", i, s.reason, diff)
		}
		for n, r := range rsp.GetDesired().GetResources() {
			if sp := r.GetResource().GetFields()["spec"].String(); strings.Contains(sp, keyB64) || strings.Contains(sp, "PRIVATE KEY") {
				t.Errorf("step %d: the desired %s carries the CA's private key in its spec", i, n)
			}
		}
		st := status(rsp)
		if st := rsp.GetDesired().GetComposite().GetResource().String(); strings.Contains(st, keyB64) || strings.Contains(st, "PRIVATE KEY") {
			t.Errorf("step %d: the XR's desired status carries the CA's private key", i)
		}
		wantStatus := obj{"caCertificate": string(crt), "secretName": "inference-gateway-client-certificate"}
		if diff := cmp.Diff(wantStatus, st["backendTLS"]); diff != "" {
			t.Errorf("step %d: status.backendTLS: -want, +got:\n%s", i, diff)
		}
		issuer := manifest(rsp, "client-issuer")
		if diff := cmp.Diff(obj{"ca": obj{"secretName": "inference-gateway-client-ca"}}, issuer["spec"]); diff != "" {
			t.Errorf("step %d: Issuer spec: -want, +got:\n%s", i, diff)
		}
		if ref := manifest(rsp, "client-certificate")["spec"].(obj)["issuerRef"]; !cmp.Equal(ref, obj{"name": "inference-gateway-client-ca", "kind": "Issuer", "group": "cert-manager.io"}) {
			t.Errorf("step %d: Certificate issuerRef is %v, want the CA Issuer", i, ref)
		}

		// Crossplane applies what was desired; provider-kubernetes
		// creates and syncs it; cert-manager acts on the Certificate.
		for _, n := range []string{"client-ca-secret", "client-issuer", "client-certificate", "envoy-proxy"} {
			o := applyDesired(t, observed[n], rsp, n)
			if i == 0 && n == "client-ca-secret" {
				// The provider has created the Secret and recorded it.
				o["metadata"].(obj)["annotations"].(obj)["crossplane.io/external-create-succeeded"] = t0
				o["metadata"].(obj)["finalizers"] = []any{"finalizer.managedresource.crossplane.io"}
				observed[n] = o
				continue
			}
			observed[n] = providerSyncs(t, o)
		}
		live := observed["client-certificate"]["status"].(obj)["atProvider"].(obj)["manifest"].(obj)
		switch {
		case i >= 3:
			live["status"] = certificateManifest(cond("Ready", false, "Issuing", "Renewing certificate"), 2, "2099-01-01T00:00:00Z")["status"]
		case i == 2:
			live["status"] = certificateManifest(cond("Ready", true, "Ready", "Certificate is up to date and has not expired"), 1, "2099-01-01T00:00:00Z")["status"]
		default:
			live["status"] = certificateManifest(cond("Ready", false, "DoesNotExist", "Issuing certificate as Secret does not exist"), 0, "")["status"]
		}
	}
}

// TestClientCAPublished covers what the status publishes of a CA Secret:
// its certificates, parsed and encoded again, and nothing else. A tls.crt
// that holds a private key, a pair whose key is not the certificate's, or
// certificates longer than the XRD lets the status hold, publish nothing
// and hold GatewayReady with a message that names the Secret and what is
// wrong, never what it holds.
func TestClientCAPublished(t *testing.T) {
	crt, key := tlsPair(t)
	crt2, _ := tlsPair(t)
	_, otherKey := tlsPair(t)
	bundle := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	cases := map[string]struct {
		crt, key   []byte
		wantCA     any
		wantReason string
		wantMsg    string
	}{
		"Certificate":     {crt: crt, key: key, wantCA: string(crt), wantReason: "ClientCertificateNotReady", wantMsg: "cert-manager has not issued"},
		"Chain":           {crt: bundle(crt, crt2), key: key, wantCA: string(crt) + string(crt2), wantReason: "ClientCertificateNotReady", wantMsg: "cert-manager has not issued"},
		"TextAround":      {crt: bundle([]byte("Certificate:\n    Data: ...\n"), crt), key: key, wantCA: string(crt), wantReason: "ClientCertificateNotReady", wantMsg: "cert-manager has not issued"},
		"KeyBundledInCrt": {crt: bundle(crt, key), key: key, wantReason: "ClientCertificateNotReady", wantMsg: `the CA Secret "gateway-client-ca" in "modelplane-system" on the control plane cannot be used: in tls.crt, its PEM block 2 is a private key, not a certificate; put only the CA's certificate (PEM) in tls.crt and its private key in tls.key`},
		"Swapped":         {crt: key, key: crt, wantReason: "ClientCertificateNotReady", wantMsg: "in tls.crt, its PEM block 1 is a private key, not a certificate"},
		"KeyMismatch":     {crt: crt, key: otherKey, wantReason: "ClientCertificateNotReady", wantMsg: "holds a tls.key that is not the key of the certificate in tls.crt"},
		"OverTheLimit":    {crt: bytes.Repeat(crt, 65536/len(crt)+1), key: key, wantReason: "ClientCertificateNotReady", wantMsg: "more than the 65536 bytes that can be published"},
	}
	observed := observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true)
	observed["client-ca-secret"] = withReferences(object("client-ca-secret", plainManifest("Secret"), true, true))
	observed["client-certificate"] = object("client-certificate", certificateManifest(cond("Ready", false, "Issuing", ""), 0, ""), true, true)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, newRequest(t, gatewayXR(caClientCertSpec), observed, map[string][]obj{"client-ca-secret": {clientCASecret(tc.crt, tc.key)}}))
			st, _ := status(rsp)["backendTLS"].(obj)
			if diff := cmp.Diff(tc.wantCA, st["caCertificate"]); diff != "" {
				t.Errorf("status.backendTLS.caCertificate: -want, +got:\n%s", diff)
			}
			c := condition(rsp, "GatewayReady")
			if c.GetReason() != tc.wantReason || !strings.Contains(c.GetMessage(), tc.wantMsg) {
				t.Errorf("GatewayReady is %s: %q, want %s containing %q", c.GetReason(), c.GetMessage(), tc.wantReason, tc.wantMsg)
			}
			if strings.Contains(marshal(t, rsp), "BEGIN PRIVATE KEY") {
				t.Errorf("the response holds a private key's PEM block")
			}
		})
	}
}

// TestClientCASecretMissing covers a caSecretRef Secret missing on the
// control plane: before the first certificate GatewayReady names it; after
// it, the certificate serves, a Warning says renewals will fail, and the
// copy composed before is carried forward.
func TestClientCASecretMissing(t *testing.T) {
	observed := observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true)
	required := map[string][]obj{"client-ca-secret": {}}
	rsp := run(t, newRequest(t, gatewayXR(caClientCertSpec), observed, required))
	c := condition(rsp, "GatewayReady")
	if want := `the CA Secret "gateway-client-ca" does not exist in "modelplane-system" on the control plane`; c.GetReason() != "ClientCertificateNotReady" || !strings.Contains(c.GetMessage(), want) {
		t.Errorf("before the first certificate: GatewayReady is %s: %q, want ClientCertificateNotReady containing %q", c.GetReason(), c.GetMessage(), want)
	}
	if _, ok := rsp.GetDesired().GetResources()["client-ca-secret"]; ok {
		t.Errorf("client-ca-secret is desired though the CA Secret is missing and was never composed")
	}

	observed["client-certificate"] = object("client-certificate", certificateManifest(cond("Ready", true, "Ready", ""), 1, "2099-01-01T00:00:00Z"), true, true)
	ca := withReferences(object("client-ca-secret", plainManifest("Secret"), true, true))
	observed["client-ca-secret"] = ca
	rsp = run(t, newRequest(t, gatewayXR(caClientCertSpec), observed, required))
	if c := condition(rsp, "GatewayReady"); c.GetReason() != "Serving" {
		t.Errorf("after the first certificate: GatewayReady is %s: %q, want Serving", c.GetReason(), c.GetMessage())
	}
	warned := false
	for _, r := range results(rsp) {
		warned = warned || strings.HasPrefix(r, "SEVERITY_WARNING: ") && strings.Contains(r, `the CA Secret "gateway-client-ca" does not exist`) && strings.Contains(r, "cannot renew it")
	}
	if !warned {
		t.Errorf("no Warning says the certificate cannot be renewed: %v", results(rsp))
	}
	if diff := cmp.Diff(ca["spec"], rsp.GetDesired().GetResources()["client-ca-secret"].GetResource().AsMap()["spec"]); diff != "" {
		t.Errorf("client-ca-secret is not carried forward: -observed, +desired:\n%s", diff)
	}
}

// TestClientCertificateSpecErrors covers what cert-manager would refuse.
func TestClientCertificateSpecErrors(t *testing.T) {
	cases := map[string]struct {
		cc      obj
		message string
	}{
		"Both":            {obj{"issuerRef": obj{"name": "a"}, "caSecretRef": obj{"name": "b"}}, "exactly one of issuerRef and caSecretRef"},
		"Neither":         {obj{}, "exactly one of issuerRef and caSecretRef"},
		"ShortDuration":   {obj{"issuerRef": obj{"name": "a"}, "duration": "30m"}, "under cert-manager's minimum of 1h"},
		"RenewAfterStart": {obj{"issuerRef": obj{"name": "a"}, "duration": "24h", "renewBefore": "24h"}, "is not less than its duration"},
		"NotADuration":    {obj{"issuerRef": obj{"name": "a"}, "duration": "ninety days"}, "is not a duration"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := obj{"providerConfigName": "gpu-cluster-1", "backendTLS": obj{"clientCertificate": tc.cc}}
			rsp := run(t, newRequest(t, gatewayXR(spec), nil, nil))
			var fatal []string
			for _, r := range results(rsp) {
				if strings.HasPrefix(r, "SEVERITY_FATAL: ") {
					fatal = append(fatal, r)
				}
			}
			if len(fatal) != 1 || !strings.Contains(fatal[0], tc.message) {
				t.Errorf("results %v, want one Fatal containing %q", results(rsp), tc.message)
			}
		})
	}
}

// TestClientCAKeyNeverLeaks runs the CA cases with a logger that records
// everything at debug level, and checks that the CA's private key, raw or
// base64, appears in no desired resource, the composite, a condition, a
// result, a requirement or a log line.
func TestClientCAKeyNeverLeaks(t *testing.T) {
	crt, key := tlsPair(t)
	_, otherKey := tlsPair(t)
	rolled := observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true)
	delivered := observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true)
	delivered["client-ca-secret"] = withReferences(object("client-ca-secret", plainManifest("Secret"), true, true))
	delivered["client-certificate"] = object("client-certificate", certificateManifest(cond("Ready", true, "Ready", ""), 1, "2099-01-01T00:00:00Z"), true, true)
	reqs := map[string]*fnv1.RunFunctionRequest{
		"FirstCopy":   newRequest(t, gatewayXR(caClientCertSpec), rolled, map[string][]obj{"client-ca-secret": {clientCASecret(crt, key)}}),
		"Delivered":   newRequest(t, gatewayXR(caClientCertSpec), delivered, map[string][]obj{"client-ca-secret": {clientCASecret(crt, key)}}),
		"KeyMismatch": newRequest(t, gatewayXR(caClientCertSpec), delivered, map[string][]obj{"client-ca-secret": {clientCASecret(crt, otherKey)}}),
		"Fatal": newRequest(t, gatewayXR(obj{"providerConfigName": "gpu-cluster-1", "backendTLS": obj{"clientCertificate": obj{"caSecretRef": obj{"name": "gateway-client-ca"}, "duration": "1m"}}}),
			rolled, map[string][]obj{"client-ca-secret": {clientCASecret(crt, key)}}),
		// tls.crt holds the certificate followed by its key, a common way
		// to build such a Secret; or the two entries are swapped.
		"KeyBundledInCrt": newRequest(t, gatewayXR(caClientCertSpec), delivered, map[string][]obj{"client-ca-secret": {clientCASecret(append(append([]byte{}, crt...), key...), key)}}),
		"Swapped":         newRequest(t, gatewayXR(caClientCertSpec), delivered, map[string][]obj{"client-ca-secret": {clientCASecret(key, crt)}}),
	}
	secrets := []string{string(key), string(otherKey), base64.StdEncoding.EncodeToString(key), base64.StdEncoding.EncodeToString(otherKey)}
	for name, req := range reqs {
		t.Run(name, func(t *testing.T) { noLeak(t, req, secrets, "the CA's key") })
	}
}
