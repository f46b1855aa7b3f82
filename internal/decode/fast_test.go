package decode

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	aigv1b1 "github.com/envoyproxy/ai-gateway/api/v1beta1"
	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// observedStatus has the shapes of the statuses the composers read of
// their composites and of cert-manager's Certificate.
type observedStatus struct {
	Conditions    []metav1.Condition `json:"conditions"`
	NotReadySince *metav1.Time       `json:"notReadySince"`
	Revision      *int               `json:"revision,omitempty"`
	NotAfter      *metav1.Time       `json:"notAfter,omitempty"`
}

// caseSpec is a spec with an exported inline struct and a type that
// decodes itself.
type caseSpec struct {
	Inline   `json:",inline"`
	Name     string            `json:"name,omitempty"`
	Backends []strictBackend   `json:"backends,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Limit    *quantity         `json:"limit,omitempty"`
}

// Inline is caseSpec's inline struct.
type Inline struct {
	Replicas *int32 `json:"replicas,omitempty"`
}

// condition is a status condition as the API server writes it.
func condition(typ string) map[string]any {
	return map[string]any{"type": typ, "status": "True", "reason": "Ready", "message": "ok <&>", "observedGeneration": 3.0, "lastTransitionTime": "2026-12-01T10:00:00Z"}
}

// TestFastIntoMatchesEncodingJSON checks that fastInto decodes what the
// composers read as encoding/json does, and that where it fails it leaves
// the value as it was, for Into to decode again.
func TestFastIntoMatchesEncodingJSON(t *testing.T) {
	conds := []any{condition("Accepted"), condition("Programmed")}
	cases := map[string]struct {
		reason string
		in     any
		into   func() any
		ok     bool
	}{
		"Deployment": {
			reason: "The observed Envoy Deployment: labels, annotations, counters as float64, a template, unknown fields.",
			in: map[string]any{
				"apiVersion": "apps/v1", "kind": "Deployment",
				"metadata": map[string]any{"name": "envoy", "namespace": "envoy-gateway-system", "generation": 4.0, "creationTimestamp": "2026-12-01T10:00:00Z",
					"labels": map[string]any{"app": "envoy"}, "annotations": map[string]any{"a": "b"}, "managedFields": []any{map[string]any{"manager": "x", "fieldsV1": map[string]any{"f:spec": map[string]any{}}}}},
				"spec": map[string]any{"replicas": 2.0, "strategy": map[string]any{"rollingUpdate": map[string]any{"maxSurge": "25%", "maxUnavailable": 1.0}},
					"template": map[string]any{"metadata": map[string]any{"annotations": map[string]any{"aigateway.envoyproxy.io/extproc-config-hash": "9c1f"}},
						"spec": map[string]any{"containers": []any{map[string]any{"name": "envoy", "image": "envoy:1", "resources": map[string]any{"limits": map[string]any{"cpu": "500m", "memory": "1Gi"}}}}}}},
				"status": map[string]any{"observedGeneration": 4.0, "replicas": 2.0, "updatedReplicas": 2.0, "availableReplicas": 2.0, "readyReplicas": 2.0, "conditions": []any{condition("Available")}, "unknown": true},
			},
			into: func() any { return &appsv1.Deployment{} },
			ok:   true,
		},
		"GatewayStatus": {
			reason: "The observed Gateway's status: addresses and listeners.",
			in: map[string]any{"addresses": []any{map[string]any{"type": "IPAddress", "value": "203.0.113.10"}},
				"conditions": conds,
				"listeners":  []any{map[string]any{"name": "https", "attachedRoutes": 2.0, "supportedKinds": []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}}, "conditions": conds}}},
			into: func() any { return &gwapiv1.GatewayStatus{} },
			ok:   true,
		},
		"PolicyStatus": {
			reason: "A policy's ancestors, with optional pointers.",
			in: map[string]any{"ancestors": []any{map[string]any{"ancestorRef": map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw", "namespace": "modelplane-system"},
				"controllerName": "gateway.envoyproxy.io/gatewayclass-controller", "conditions": conds}}},
			into: func() any { return &gwapiv1.PolicyStatus{} },
			ok:   true,
		},
		"HTTPRouteStatus": {
			reason: "An HTTPRoute's parents.",
			in: map[string]any{"parents": []any{map[string]any{"parentRef": map[string]any{"name": "gw", "sectionName": "https"},
				"controllerName": "gateway.envoyproxy.io/gatewayclass-controller", "conditions": conds}}},
			into: func() any { return &gwapiv1.HTTPRouteStatus{} },
			ok:   true,
		},
		"AIGatewayRouteStatus": {
			reason: "An AIGatewayRoute's conditions.",
			in:     map[string]any{"conditions": conds},
			into:   func() any { return &aigv1b1.AIGatewayRouteStatus{} },
			ok:     true,
		},
		"ObservedStatus": {
			reason: "Times decode through metav1.Time's UnmarshalJSON; null leaves a pointer nil.",
			in:     map[string]any{"conditions": conds, "notReadySince": "2026-12-01T10:00:01Z", "revision": 3.0, "notAfter": nil},
			into:   func() any { return &observedStatus{} },
			ok:     true,
		},
		"CaseInsensitive": {
			reason: "encoding/json matches names case-insensitively, and an inline struct's fields as its own.",
			in:     map[string]any{"NAME": "a", "Replicas": 2.0, "backends": []any{map[string]any{"name": "b", "WEIGHT": 3.0}}, "labels": map[string]any{"k": "v"}, "limit": "1Gi", "unknown": 1.0},
			into:   func() any { return &caseSpec{} },
			ok:     true,
		},
		"UnexportedInline": {
			reason: "go-json-experiment/json refuses to inline an unexported struct, which encoding/json inlines: Into decodes it with encoding/json.",
			in:     map[string]any{"name": "a", "replicas": 2.0},
			into:   func() any { return &strictSpec{} },
		},
		"Null": {
			reason: "A missing status decodes to the zero value.",
			in:     nil,
			into:   func() any { return &observedStatus{} },
			ok:     true,
		},
		"Fraction": {
			reason: "A fraction where a whole number belongs fails, and leaves the value as it was.",
			in:     map[string]any{"name": "a", "replicas": 2.5},
			into:   func() any { return &caseSpec{} },
		},
		"StringForList": {
			reason: "A string where a list belongs fails after a field it has decoded, and leaves the value as it was.",
			in:     map[string]any{"name": "a", "backends": "b"},
			into:   func() any { return &caseSpec{} },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.into()
			if ok := fastInto(tc.in, got); ok != tc.ok {
				t.Fatalf("%s\nfastInto(...): want %t, got %t", tc.reason, tc.ok, ok)
			}
			if !tc.ok {
				if diff := cmp.Diff(tc.into(), got, cmp.AllowUnexported(strictSpec{}, caseSpec{}, quantity{})); diff != "" {
					t.Errorf("%s\nfastInto(...) changed the value it failed to decode into: -before, +after:\n%s", tc.reason, diff)
				}
				return
			}
			b, err := json.Marshal(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.into()
			if err := json.NewDecoder(bytes.NewReader(b)).Decode(want); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(strictSpec{}, caseSpec{}, quantity{})); diff != "" {
				t.Errorf("%s\nfastInto(...): -encoding/json, +fastInto:\n%s", tc.reason, diff)
			}
			if reflect.TypeOf(want) != reflect.TypeOf(got) {
				t.Errorf("%s\nfastInto(...) decoded a %T, want %T", tc.reason, got, want)
			}
		})
	}
}

// BenchmarkInto measures Into on the observed Envoy Deployment a gateway's
// reconcile reads.
func BenchmarkInto(b *testing.B) {
	dep := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "envoy", "namespace": "envoy-gateway-system", "generation": 4.0},
		"spec":     map[string]any{"replicas": 2.0, "template": map[string]any{"metadata": map[string]any{"annotations": map[string]any{"aigateway.envoyproxy.io/extproc-config-hash": "9c1f"}}}},
		"status":   map[string]any{"observedGeneration": 4.0, "replicas": 2.0, "updatedReplicas": 2.0, "availableReplicas": 2.0, "readyReplicas": 2.0, "conditions": []any{condition("Available")}},
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := Into("the Deployment", "", dep, &appsv1.Deployment{}); err != nil {
			b.Fatal(err)
		}
	}
}
