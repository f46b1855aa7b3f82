package fn

import (
	"encoding/json"
	"testing"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// typedManifest decodes the manifest of a desired Object into its upstream
// typed spec.
func typedManifest[S any](t *testing.T, m obj) S {
	t.Helper()
	var into struct {
		Spec S `json:"spec"`
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &into); err != nil {
		t.Fatal(err)
	}
	return into.Spec
}

func TestGatewayPolicies(t *testing.T) {
	target := egv1a1.PolicyTargetReferences{TargetRefs: []gwapiv1.LocalPolicyTargetReferenceWithSectionName{{
		LocalPolicyTargetReference: gwapiv1.LocalPolicyTargetReference{Group: "gateway.networking.k8s.io", Kind: "Gateway", Name: "inference-gateway"},
	}}}
	passive := &egv1a1.PassiveHealthCheck{
		Interval: ptr.To(gwapiv1.Duration("5s")), Consecutive5xxErrors: ptr.To[uint32](5),
		BaseEjectionTime: ptr.To(gwapiv1.Duration("30s")), MaxEjectionPercent: ptr.To[int32](100),
	}
	ctp := func(limit string) egv1a1.ClientTrafficPolicySpec {
		return egv1a1.ClientTrafficPolicySpec{
			PolicyTargetReferences: target,
			Connection:             &egv1a1.ClientConnection{BufferLimit: new(resource.MustParse(limit))},
			HTTP2: &egv1a1.HTTP2Settings{
				InitialStreamWindowSize:     new(resource.MustParse("16Mi")),
				InitialConnectionWindowSize: new(resource.MustParse("24Mi")),
			},
			// A client's own caller header never gets past the front door.
			Headers: &egv1a1.HeaderSettings{EarlyRequestHeaders: &egv1a1.HTTPHeaderFilter{Remove: []string{"x-modelplane-caller"}}},
		}
	}
	btp := func(retries int32, on *egv1a1.RetryOn, threshold uint32) egv1a1.BackendTrafficPolicySpec {
		return egv1a1.BackendTrafficPolicySpec{
			PolicyTargetReferences: target,
			ClusterSettings: egv1a1.ClusterSettings{
				Retry:       &egv1a1.Retry{NumRetries: new(retries), NumAttemptsPerPriority: ptr.To[int32](1), RetryOn: on},
				HealthCheck: &egv1a1.HealthCheck{Passive: passive, PanicThreshold: new(threshold)},
			},
		}
	}
	safe := []egv1a1.TriggerEnum{egv1a1.ConnectFailure, egv1a1.RefusedStream, egv1a1.ResetBeforeRequest, egv1a1.RetriableStatusCodes}
	cases := map[string]struct {
		reason string
		spec   obj
		client egv1a1.ClientTrafficPolicySpec
		backnd egv1a1.BackendTrafficPolicySpec
	}{
		"Defaults": {
			reason: "Bodies up to 50Mi pass; 429 and 503 and failures before the request was sent fail over; Envoy's own panic threshold.",
			spec:   obj{"providerConfigName": "gpu-cluster-1"},
			client: ctp("50Mi"),
			backnd: btp(3, &egv1a1.RetryOn{Triggers: safe, HTTPStatusCodes: []egv1a1.HTTPStatus{429, 503}}, 50),
		},
		"Tuned": {
			reason: "Every setting reaches its policy; status codes bring the retriable-status-codes trigger along.",
			spec: obj{"providerConfigName": "gpu-cluster-1", "connection": obj{"bufferLimit": "100Mi"},
				"failover": obj{"numRetries": 1, "panicThreshold": 0, "retryOn": obj{"triggers": []any{"connect-failure", "5xx"}, "httpStatusCodes": []any{429}}}},
			client: ctp("100Mi"),
			backnd: btp(1, &egv1a1.RetryOn{Triggers: []egv1a1.TriggerEnum{egv1a1.ConnectFailure, egv1a1.Error5XX, egv1a1.RetriableStatusCodes}, HTTPStatusCodes: []egv1a1.HTTPStatus{429}}, 0),
		},
		"NoStatusCodes": {
			reason: "An empty list of status codes retries on none; the default triggers stay.",
			spec:   obj{"providerConfigName": "gpu-cluster-1", "failover": obj{"retryOn": obj{"httpStatusCodes": []any{}}}},
			client: ctp("50Mi"),
			backnd: btp(3, &egv1a1.RetryOn{Triggers: safe}, 50),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, newRequest(t, gatewayXR(tc.spec), nil, nil))
			if diff := cmp.Diff(tc.client, typedManifest[egv1a1.ClientTrafficPolicySpec](t, manifest(rsp, "client-policy"))); diff != "" {
				t.Errorf("%s\nClientTrafficPolicy spec: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.backnd, typedManifest[egv1a1.BackendTrafficPolicySpec](t, manifest(rsp, "failover-policy"))); diff != "" {
				t.Errorf("%s\nBackendTrafficPolicy spec: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestGatewayNamespace(t *testing.T) {
	rsp := run(t, newRequest(t, gatewayXR(nil), nil, nil))
	got := rsp.GetDesired().GetResources()["gateway-namespace"].GetResource().AsMap()["spec"].(obj)
	want := obj{
		// Created and updated, never deleted: other things may live there.
		"managementPolicies": []any{"Observe", "Create", "Update"},
		"forProvider":        obj{"manifest": obj{"apiVersion": "v1", "kind": "Namespace", "metadata": obj{"name": "modelplane-system"}}},
		"providerConfigRef":  obj{"kind": "ClusterProviderConfig", "name": "gpu-cluster-1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("gateway-namespace Object spec: -want, +got:\n%s", diff)
	}
}
