package fn

import (
	"strings"
	"testing"
)

// routeParent is an entry of an HTTPRoute's status.parents from Envoy
// Gateway for our Gateway's listener section: Accepted with reason, and
// ResolvedRefs True.
func routeParent(section string, accepted bool, reason string) obj {
	return obj{
		"parentRef":      obj{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference-gateway", "namespace": "modelplane-system", "sectionName": section},
		"controllerName": "gateway.envoyproxy.io/gatewayclass-controller",
		"conditions":     []any{cond("Accepted", accepted, reason, "Envoy Gateway says "+reason), cond("ResolvedRefs", true, "ResolvedRefs", "Resolved all the Object references for the Route")},
	}
}

// TestRouteServedOnItsListener: RoutingReady reads Envoy Gateway's verdict
// for the listener the route is composed on. When TLS is turned on, the
// route moves from http to https and Envoy Gateway v1.8.3 keeps the http
// entry, NotAllowedByListeners, before the new one: seen against the real
// controller in the control-plane suite's TLS scenario, where every
// ModelRoute stayed RoutingReady=False while its route was served on https.
func TestRouteServedOnItsListener(t *testing.T) {
	ab := []obj{backend("a", 1, 1, "key-a"), backend("b", 0, 1, "")}
	cases := map[string]struct {
		reason  string
		tls     bool
		parents []any
		want    string
		message string
	}{
		"MovedToHTTPS": {
			reason:  "TLS turned on: the stale http entry comes first, the https one accepts the route.",
			tls:     true,
			parents: []any{routeParent("http", false, "NotAllowedByListeners"), routeParent("https", true, "Accepted")},
			want:    "RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted",
		},
		"NotYetOnHTTPS": {
			reason:  "TLS turned on, but the HTTPRoute is still judged on http only: nothing says it is served on https yet.",
			tls:     true,
			parents: []any{routeParent("http", true, "Accepted")},
			want:    "RoutingReady=STATUS_CONDITION_FALSE/HTTPRouteNotAccepted",
			message: "has not reported on the HTTPRoute",
		},
		"RejectedOnHTTPS": {
			reason:  "The https entry refuses the route, whatever the stale http entry said.",
			tls:     true,
			parents: []any{routeParent("http", true, "Accepted"), routeParent("https", false, "NotAllowedByListeners")},
			want:    "RoutingReady=STATUS_CONDITION_FALSE/HTTPRouteNotAccepted",
			message: "Accepted=False (NotAllowedByListeners)",
		},
		"BackToHTTP": {
			reason:  "TLS turned off: the stale https entry comes first, the http one accepts the route.",
			parents: []any{routeParent("https", false, "NotAllowedByListeners"), routeParent("http", true, "Accepted")},
			want:    "RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := observedRoute(true)
			o["httproute"] = object("httproute", obj{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": obj{"name": "qwen"},
				"status": obj{"parents": tc.parents}}, true, true)
			req := map[string][]obj{"gateway": {inferenceGateway(true, "Serving", tc.tls)}, "secret-key-a": keyA}
			rsp := run(t, newRequest(t, routeXR(ab...), o, req))
			if got := summarize(rsp).Conditions[0]; got != tc.want {
				t.Errorf("%s\nwant %s, got %s: %s", tc.reason, tc.want, got, condition(rsp, "RoutingReady").GetMessage())
			}
			if msg := condition(rsp, "RoutingReady").GetMessage(); !strings.Contains(msg, tc.message) {
				t.Errorf("%s\nmessage %q does not contain %q", tc.reason, msg, tc.message)
			}
		})
	}
}
