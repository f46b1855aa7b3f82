package fn

import (
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// gatewayWithSpec is a GatewayReady InferenceGateway (inferenceGateway)
// whose spec is base with extra fields set.
func gatewayWithSpec(base, extra obj) obj {
	gw := inferenceGateway(true, "Serving", false)
	spec := maps.Clone(base)
	maps.Copy(spec, extra)
	gw["spec"] = spec
	return gw
}

// TestRouteReadsGatewayLeniently: a ModelRoute reads only what it uses of
// its InferenceGateway's spec (the provider config and whether TLS is on),
// so a gateway spec that the gateway's own rules refuse elsewhere, or a rule
// made stricter later, does not stop the ModelRoute from composing.
func TestRouteReadsGatewayLeniently(t *testing.T) {
	plain := obj{"providerConfigName": "gpu-cluster-1"}
	type want struct {
		condition string
		// message is part of RoutingReady's message.
		message string
		// sectionName the route binds, and the ClusterProviderConfig its
		// Object uses; both empty when the route is not composed.
		sectionName, providerConfig string
	}
	cases := map[string]struct {
		reason string
		gw     obj
		want   want
	}{
		"Valid": {
			reason: "A valid gateway: the route is composed on its cluster.",
			gw:     gatewayWithSpec(plain, nil),
			want:   want{condition: "RoutingReady=STATUS_CONDITION_FALSE/WaitingForRoute", sectionName: "http", providerConfig: "gpu-cluster-1"},
		},
		"FailoverOutOfRange": {
			reason: "spec.failover.numRetries breaks the gateway's rule (0 to 10), which the route does not care about.",
			gw:     gatewayWithSpec(plain, obj{"failover": obj{"numRetries": 99}}),
			want:   want{condition: "RoutingReady=STATUS_CONDITION_FALSE/WaitingForRoute", sectionName: "http", providerConfig: "gpu-cluster-1"},
		},
		"DrainTimeoutNotADuration": {
			reason: "A bad spec.envoy.drainTimeout and an unknown field do not concern the route.",
			gw:     gatewayWithSpec(plain, obj{"envoy": obj{"drainTimeout": "forever"}, "somethingNew": true}),
			want:   want{condition: "RoutingReady=STATUS_CONDITION_FALSE/WaitingForRoute", sectionName: "http", providerConfig: "gpu-cluster-1"},
		},
		"TLSWithoutHostname": {
			reason: "spec.tls without spec.hostname breaks a gateway rule; the route still binds the https listener the spec asks for.",
			gw:     gatewayWithSpec(plain, obj{"tls": obj{"certificateRefs": []any{obj{"name": "llm-tls"}}}}),
			want:   want{condition: "RoutingReady=STATUS_CONDITION_FALSE/WaitingForRoute", sectionName: "https", providerConfig: "gpu-cluster-1"},
		},
		"NoProviderConfig": {
			reason: "Without spec.providerConfigName there is no cluster to compose on.",
			gw:     gatewayWithSpec(obj{}, nil),
			want:   want{condition: "RoutingReady=STATUS_CONDITION_FALSE/WaitingForGateway", message: "spec.providerConfigName is not set"},
		},
		"TLSNotAnObject": {
			reason: "spec.tls that is not an object says nothing of the listener to bind.",
			gw:     gatewayWithSpec(plain, obj{"tls": "yes"}),
			want:   want{condition: "RoutingReady=STATUS_CONDITION_FALSE/WaitingForGateway", message: "spec.tls is a string"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, newRequest(t, routeXR(backend("x", 0, 1, "")), placed("x"), map[string][]obj{"gateway": {tc.gw}}))
			got := want{condition: summarize(rsp).Conditions[0]}
			if msg := condition(rsp, "RoutingReady").GetMessage(); tc.want.message != "" && strings.Contains(msg, tc.want.message) {
				got.message = tc.want.message
			}
			if r := rsp.GetDesired().GetResources()["route"]; r != nil {
				parents, _ := manifest(rsp, "route")["spec"].(obj)["parentRefs"].([]any)
				if len(parents) == 1 {
					got.sectionName, _ = parents[0].(obj)["sectionName"].(string)
				}
				ref, _ := r.GetResource().AsMap()["spec"].(obj)["providerConfigRef"].(obj)
				got.providerConfig, _ = ref["name"].(string)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nRunFunction(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
