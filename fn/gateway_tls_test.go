package fn

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
// SecretsMissing and keeps what was composed; a present one is copied by
// reference, never by value.
func TestTLSSecrets(t *testing.T) {
	cases := map[string]struct {
		reason   string
		observed map[string]obj
		required map[string][]obj
		// wantReason of GatewayReady, and a part of its message.
		wantReason, message string
		// composed: the TLS Secret's Object is desired; references: with them.
		composed, references bool
	}{
		"Missing": {
			reason:     "The Secret is not on the control plane: SecretsMissing names it, the composed copy is carried forward.",
			observed:   observedTLSGateway(true),
			required:   map[string][]obj{"tls-secret-llm-tls": {}},
			wantReason: "SecretsMissing", message: `the TLS Secret "llm-tls" does not exist in "modelplane-system"`,
			composed: true, references: true,
		},
		"MissingNeverComposed": {
			reason:     "The Secret is not on the control plane and was never composed: nothing to carry.",
			observed:   observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true),
			required:   map[string][]obj{"tls-secret-llm-tls": {}},
			wantReason: "SecretsMissing", message: "does not exist",
		},
		"NoKey": {
			reason:     "The Secret has a certificate but no key.",
			observed:   observedTLSGateway(true),
			required:   map[string][]obj{"tls-secret-llm-tls": {tlsSecret(true, false)}},
			wantReason: "SecretsMissing", message: "has no tls.key",
			composed: true, references: true,
		},
		"FirstComposition": {
			reason:     "The Secret exists; its Object is created without references first.",
			observed:   observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true),
			required:   map[string][]obj{"tls-secret-llm-tls": {tlsSecret(true, true)}},
			wantReason: "SecretsMissing", message: "has not reached the gateway cluster yet",
			composed: true,
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
			if s := d.GetResource().String(); strings.Contains(s, "Y2VydA==") || strings.Contains(s, "a2V5") {
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
