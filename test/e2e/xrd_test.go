package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/modelplaneai/function-inference-gateway/test/e2e/harness"
	"github.com/modelplaneai/function-inference-gateway/test/e2e/validate"
)

// crdOf is the CRD Crossplane makes of the XRD at path (validate.ReadXRD).
func crdOf(t *testing.T, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd, err := validate.ReadXRD(path)
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

// TestXRDTransitionRules runs updates of an InferenceGateway through the
// example XRD's rules with the old object as oldSelf, which crossplane beta
// validate cannot do: it validates each resource as created (crossplane
// v2.2.0 cmd/crank/beta/validate/validate.go passes no old object to the
// CEL validator), so transition rules are never run there.
func TestXRDTransitionRules(t *testing.T) {
	v, err := validate.New([]*apiextensionsv1.CustomResourceDefinition{crdOf(t, filepath.Join(harness.ConfigurationDir(h.Examples()), "gateway", harness.FileXRD))})
	if err != nil {
		t.Fatal(err)
	}
	// Numbers are int64, as the API server decodes them.
	xr := func(providerConfig string, replicas int64) map[string]any {
		return map[string]any{
			"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceGateway",
			"metadata": map[string]any{"name": "inference-gateway"},
			"spec":     map[string]any{"providerConfigName": providerConfig, "replicas": replicas},
		}
	}
	ctx := context.Background()
	if _, errs := v.Validate(ctx, xr("gpu-cluster-1", 2)); len(errs) != 0 {
		t.Fatalf("the example XRD rejects a new InferenceGateway: %v", errs.ToAggregate())
	}
	cases := map[string]struct {
		reason   string
		old, new map[string]any
		want     string
	}{
		"OtherField": {
			reason: "Changing another field is allowed.",
			old:    xr("gpu-cluster-1", 2), new: xr("gpu-cluster-1", 3),
		},
		"ProviderConfigName": {
			reason: "Changing providerConfigName is refused, with a message that says what to do.",
			old:    xr("gpu-cluster-1", 2), new: xr("gpu-cluster-2", 2),
			want: `spec.providerConfigName: Invalid value: "gpu-cluster-2": spec.providerConfigName is immutable: to serve another cluster, create another InferenceGateway with that providerConfigName`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := v.ValidateUpdate(ctx, tc.old, tc.new)
			got := ""
			if len(errs) > 0 {
				got = errs.ToAggregate().Error()
			}
			if tc.want == "" {
				if diff := cmp.Diff("", got); diff != "" {
					t.Errorf("%s\nValidateUpdate(...): -want, +got:\n%s", tc.reason, diff)
				}
				return
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("%s\nValidateUpdate(...) = %q, want it to contain %q", tc.reason, got, tc.want)
			}
		})
	}
}

// TestXRDCreateRules creates XRs that only the XRDs' rules refuse, beyond
// types and required fields: the ranges and formats the function checks
// too (internal/apis/v1alpha1, Validate), so the API server
// refuses them when they are written rather than the function when it runs.
func TestXRDCreateRules(t *testing.T) {
	dir := harness.ConfigurationDir(h.Examples())
	v, err := validate.New([]*apiextensionsv1.CustomResourceDefinition{
		crdOf(t, filepath.Join(dir, "gateway", harness.FileXRD)),
		crdOf(t, filepath.Join(dir, "route", harness.FileXRD)),
	})
	if err != nil {
		t.Fatal(err)
	}
	gateway := func(spec map[string]any) map[string]any {
		spec["providerConfigName"] = "gpu-cluster-1"
		return map[string]any{
			"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceGateway",
			"metadata": map[string]any{"name": "inference-gateway"},
			"spec":     spec,
		}
	}
	drain := func(d string) map[string]any {
		return gateway(map[string]any{"envoy": map[string]any{"drainTimeout": d}})
	}
	cert := func(name string) map[string]any {
		return gateway(map[string]any{"hostname": "llm.example.com", "tls": map[string]any{"certificateRefs": []any{map[string]any{"name": name}}}})
	}
	route := func(secretName, key string) map[string]any {
		return map[string]any{
			"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelRoute",
			"metadata": map[string]any{"name": "llama", "namespace": "ml-team"},
			"spec": map[string]any{"gatewayName": "inference-gateway", "backends": []any{map[string]any{
				"name": "openai", "endpoint": map[string]any{"hostname": "api.openai.com"}, "schema": map[string]any{"name": "OpenAI"},
				"apiKey": map[string]any{"secretRef": map[string]any{"name": secretName, "key": key}},
			}}},
		}
	}
	clientCert := func(cc map[string]any) map[string]any {
		return gateway(map[string]any{"backendTLS": map[string]any{"clientCertificate": cc}})
	}
	endpoint := func(ep map[string]any) map[string]any {
		return map[string]any{
			"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelRoute",
			"metadata": map[string]any{"name": "llama", "namespace": "ml-team"},
			"spec": map[string]any{"gatewayName": "inference-gateway", "backends": []any{map[string]any{
				"name": "vllm", "endpoint": ep, "schema": map[string]any{"name": "OpenAI"},
			}}},
		}
	}
	caRef := map[string]any{"caRef": map[string]any{"kind": "ConfigMap", "name": "vllm-ca"}, "clientCertificate": true}
	cases := map[string]struct {
		reason string
		xr     map[string]any
		want   string
	}{
		"ClientCertificateIssuer":  {reason: "A client certificate from a named issuer.", xr: clientCert(map[string]any{"issuerRef": map[string]any{"name": "corp-ca", "kind": "ClusterIssuer"}, "duration": "720h", "renewBefore": "240h"})},
		"ClientCertificateCA":      {reason: "A client certificate from a CA on the control plane.", xr: clientCert(map[string]any{"caSecretRef": map[string]any{"name": "gateway-client-ca"}})},
		"ClientCertificateBoth":    {reason: "An issuer and a CA at once are refused.", xr: clientCert(map[string]any{"issuerRef": map[string]any{"name": "corp-ca"}, "caSecretRef": map[string]any{"name": "ca"}}), want: "set exactly one of issuerRef and caSecretRef"},
		"ClientCertificateNeither": {reason: "Neither an issuer nor a CA is refused.", xr: clientCert(map[string]any{"duration": "720h"}), want: "set exactly one of issuerRef and caSecretRef"},
		"ClientCertificateKind":    {reason: "An issuer kind cert-manager does not have is refused.", xr: clientCert(map[string]any{"issuerRef": map[string]any{"name": "corp-ca", "kind": "Vault"}}), want: "spec.backendTLS.clientCertificate.issuerRef.kind: Unsupported value"},
		"BackendCA":                {reason: "A backend verified by its own CA, asking for the client certificate.", xr: endpoint(map[string]any{"hostname": "vllm.ml-team.svc.cluster.local", "tlsConfig": caRef})},
		"BackendCAWithTLSTrue":     {reason: "tls: true next to tlsConfig is what tlsConfig means.", xr: endpoint(map[string]any{"hostname": "vllm.ml-team.svc.cluster.local", "tls": true, "tlsConfig": caRef})},
		"BackendPlainHTTPStill":    {reason: "tls: false without tlsConfig stays valid, as before.", xr: endpoint(map[string]any{"hostname": "vllm.ml-team.svc.cluster.local", "tls": false})},
		"BackendCAWithoutTLS":      {reason: "tlsConfig with tls: false is refused.", xr: endpoint(map[string]any{"hostname": "vllm.ml-team.svc.cluster.local", "tls": false, "tlsConfig": caRef}), want: "endpoint.tlsConfig needs TLS"},
		"BackendCAKind":            {reason: "A CA in anything but a ConfigMap or Secret is refused.", xr: endpoint(map[string]any{"hostname": "vllm.ml-team.svc.cluster.local", "tlsConfig": map[string]any{"caRef": map[string]any{"kind": "ClusterTrustBundle", "name": "x"}}}), want: "spec.backends[0].endpoint.tlsConfig.caRef.kind: Unsupported value"},
		"DrainTimeout":             {reason: "A drain timeout from 1s to 1h is accepted, in any Gateway API form.", xr: drain("1h")},
		"DrainTimeoutMinutes":      {reason: "Minutes and seconds together are one duration.", xr: drain("2m30s")},
		"DrainTimeoutTooLong":      {reason: "Over an hour is refused.", xr: drain("61m"), want: "spec.envoy.drainTimeout must be from 1s to 1h"},
		"DrainTimeoutZero":         {reason: "Under a second is refused.", xr: drain("500ms"), want: "spec.envoy.drainTimeout must be from 1s to 1h"},
		"DrainTimeoutFormat":       {reason: "A Go-only form is refused by the pattern, not by the range rule.", xr: drain("1.5m"), want: "spec.envoy.drainTimeout: Invalid value: \"1.5m\": spec.envoy.drainTimeout in body should match"},
		"CertificateRef":           {reason: "A certificateRef names a Secret.", xr: cert("llm-tls")},
		"CertificateRefName":       {reason: "A certificateRef that is no Secret name is refused.", xr: cert("LLM_tls"), want: "spec.tls.certificateRefs[0].name in body should match"},
		"SecretRef":                {reason: "An API key's secretRef names a Secret and a key.", xr: route("openai-key", "api_key.v1")},
		"SecretRefName":            {reason: "A secretRef name that is no Secret name is refused.", xr: route("OpenAI Key", "key"), want: "spec.backends[0].apiKey.secretRef.name in body should match"},
		"SecretRefKey":             {reason: "A key that no Secret can hold is refused.", xr: route("openai-key", "api key"), want: "spec.backends[0].apiKey.secretRef.key in body should match"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := v.Validate(context.Background(), tc.xr)
			got := ""
			if len(errs) > 0 {
				got = errs.ToAggregate().Error()
			}
			if tc.want == "" {
				if diff := cmp.Diff("", got); diff != "" {
					t.Errorf("%s\nValidate(...): -want, +got:\n%s", tc.reason, diff)
				}
				return
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("%s\nValidate(...) = %q, want it to contain %q", tc.reason, got, tc.want)
			}
		})
	}
}
