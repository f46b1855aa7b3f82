package fn

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// accessXR is routeXR(a: keyed, b: plain) with spec.access.callers.
func accessXR(callers ...any) obj {
	xr := routeXR(backend("a", 1, 1, "key-a"), backend("b", 0, 1, ""))
	xr["spec"].(obj)["access"] = obj{"callers": callers}
	return xr
}

// gatewayAuth is a ready InferenceGateway whose status.auth says method,
// and with APIKey the client IDs of its caller Secrets.
func gatewayAuth(method string, clientIDs ...any) []obj {
	gw := inferenceGateway(true, "Serving", false)
	switch method {
	case "":
	case "APIKey":
		gw["status"].(obj)["auth"] = obj{"method": method, "secrets": []any{"platform-callers"}, "clients": float64(len(clientIDs)), "clientIDs": clientIDs}
	default:
		gw["status"].(obj)["auth"] = obj{"method": method}
	}
	return []obj{gw}
}

// accessPolicyObject is the observed access SecurityPolicy with the
// conditions Envoy Gateway wrote for the Gateway's http listener; none
// means it has not reported.
func accessPolicyObject(conds ...any) obj {
	m := obj{"apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "SecurityPolicy", "metadata": obj{"name": "qwen-access", "namespace": teamNS}}
	if len(conds) > 0 {
		m["status"] = obj{"ancestors": []any{obj{
			"ancestorRef":    obj{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference-gateway", "namespace": "modelplane-system", "sectionName": "http"},
			"controllerName": "gateway.envoyproxy.io/gatewayclass-controller",
			"conditions":     conds,
		}}}
	}
	return object("access", m, true, len(conds) > 0)
}

// policyAccepted is Envoy Gateway's Accepted condition on a policy.
var policyAccepted = cond("Accepted", true, "Accepted", "Policy has been accepted.")

// observedAccess is observedRoute(true) with the access SecurityPolicy
// observed with conds (accessPolicyObject).
func observedAccess(conds ...any) map[string]obj {
	return withObserved(observedRoute(true), "access", accessPolicyObject(conds...))
}

// mergedWith is Envoy Gateway's Merged condition on a route's policy
// merged into the gateway's caller-auth policy (gateway v1.8.3
// internal/gatewayapi/securitypolicy.go, processSecurityPolicyForRoute).
var mergedWith = cond("Merged", true, "Merged", "Merged with policy modelplane-system/inference-gateway-callers")

// allAccess is every composition resource of accessXR.
var allAccess = append([]string{"access"}, allRoute...)

// accessWaits is the summary of accessXR serving while its SecurityPolicy
// is not enforced, for reason.
func accessWaits(reason string) summary {
	return summary{Conditions: []string{"RoutingReady=STATUS_CONDITION_FALSE/" + reason}, Resources: routeReadiness(allAccess, allRoute...), XRReady: "READY_FALSE"}
}

// accessEnforcedSummary is the summary of accessXR serving, its
// SecurityPolicy enforced.
func accessEnforcedSummary() summary {
	return summary{Conditions: []string{"RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted"}, Resources: routeReadiness(allAccess, allAccess...), XRReady: "READY_UNSPECIFIED"}
}

func TestModelRouteAccess(t *testing.T) {
	type want struct {
		summary summary
		// message holds parts of RoutingReady's message.
		message []string
	}
	cases := map[string]struct {
		reason   string
		xr       obj
		observed map[string]obj
		gateway  []obj
		want     want
	}{
		"NoAccess": {
			reason:   "Without spec.access nothing changes: no SecurityPolicy, every authenticated caller served.",
			xr:       routeXR(backend("a", 1, 1, "key-a"), backend("b", 0, 1, "")),
			observed: observedRoute(true),
			gateway:  gatewayAuth("APIKey", "ci-pipeline"),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted"},
				Resources:  routeReadiness(allRoute, allRoute...),
				XRReady:    "READY_UNSPECIFIED",
			}},
		},
		"PolicyNotObservedYet": {
			reason:   "The first reconcile with spec.access composes the SecurityPolicy; RoutingReady waits for it.",
			xr:       accessXR("ci-pipeline"),
			observed: observedRoute(true),
			gateway:  gatewayAuth("APIKey", "ci-pipeline", "notebook"),
			want:     want{summary: accessWaits("WaitingForAccessPolicy"), message: []string{`the SecurityPolicy "qwen-access"`, "has not been observed"}},
		},
		"PolicyNotJudgedYet": {
			reason:   "Envoy Gateway has written no status on the policy: waiting, and the message says the callers are not restricted yet.",
			xr:       accessXR("ci-pipeline"),
			observed: observedAccess(),
			gateway:  gatewayAuth("APIKey", "ci-pipeline"),
			want:     want{summary: accessWaits("WaitingForAccessPolicy"), message: []string{"has not judged the SecurityPolicy", "not enforced"}},
		},
		"Enforced": {
			reason:   "Accepted and merged into the gateway's caller authentication: the route serves the listed callers.",
			xr:       accessXR("notebook", "ci-pipeline"),
			observed: observedAccess(policyAccepted, mergedWith),
			gateway:  gatewayAuth("APIKey", "ci-pipeline", "notebook"),
			want:     want{summary: accessEnforcedSummary()},
		},
		"PolicyRefused": {
			reason:   "Envoy Gateway refuses the policy: RoutingReady False naming it and quoting Envoy Gateway, which fails open to every authenticated caller.",
			xr:       accessXR("ci-pipeline"),
			observed: observedAccess(cond("Accepted", false, "Invalid", "error merging policies: boom")),
			gateway:  gatewayAuth("APIKey", "ci-pipeline"),
			want:     want{summary: accessWaits("AccessPolicyNotAccepted"), message: []string{`refuses the SecurityPolicy "qwen-access"`, "error merging policies: boom", "every authenticated caller may call the model"}},
		},
		"MergeFailed": {
			reason:   "Accepted, but Merged False: Envoy Gateway applies the gateway's policy alone, so the restriction is not enforced.",
			xr:       accessXR("ci-pipeline"),
			observed: observedAccess(policyAccepted, cond("Merged", false, "Invalid", "cannot merge")),
			gateway:  gatewayAuth("APIKey", "ci-pipeline"),
			want:     want{summary: accessWaits("AccessPolicyNotAccepted"), message: []string{"Merged=False", "cannot merge", "not only spec.access.callers"}},
		},
		"NotMerged": {
			reason:   "Accepted without a Merged condition: applied alone, it checks no key and refuses every caller.",
			xr:       accessXR("ci-pipeline"),
			observed: observedAccess(policyAccepted),
			gateway:  gatewayAuth("APIKey", "ci-pipeline"),
			want:     want{summary: accessWaits("AccessPolicyNotAccepted"), message: []string{"without merging it", "every caller is refused"}},
		},
		"UnknownCaller": {
			reason:   "A listed caller no caller Secret holds: a Warning names it, and the route serves the others.",
			xr:       accessXR("ci-pipeline", "nobody"),
			observed: observedAccess(policyAccepted, mergedWith),
			gateway:  gatewayAuth("APIKey", "ci-pipeline", "notebook"),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted"},
				Resources:  routeReadiness(allAccess, allAccess...),
				XRReady:    "READY_UNSPECIFIED",
				Results: []string{`SEVERITY_WARNING: spec.access.callers[1] "nobody" is no client ID of the InferenceGateway "inference-gateway"'s caller Secrets (status.auth.clientIDs: ci-pipeline, notebook), ` +
					"so no request is let in under it; the other callers listed are; use a client ID, a data key of one of those Secrets"},
			}},
		},
		"GatewayOpenNewRoute": {
			reason:  "spec.access on a gateway without caller authentication: RoutingReady False naming the field, the gateway and the fix, and nothing composed.",
			xr:      accessXR("ci-pipeline"),
			gateway: gatewayAuth("None"),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_FALSE/AccessNotEnforceable"},
				Resources:  map[string]string{},
				XRReady:    "READY_FALSE",
			}, message: []string{"spec.access cannot be enforced", `InferenceGateway "inference-gateway"`, "status.auth.method: None", "set spec.auth.apiKey", "remove spec.access"}},
		},
		"GatewayOpenServingRoute": {
			reason:   "spec.access added to a serving route on an open gateway: nothing new (no SecurityPolicy), nothing dropped: every observed Object carried forward.",
			xr:       accessXR("ci-pipeline"),
			observed: observedRoute(true),
			gateway:  gatewayAuth("None"),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_FALSE/AccessNotEnforceable"},
				Resources:  routeReadiness(allRoute, allRoute...),
				XRReady:    "READY_FALSE",
			}, message: []string{"spec.access cannot be enforced"}},
		},
		"GatewayTurnedOpen": {
			reason:   "The gateway's caller authentication was turned off under an enforced route: its SecurityPolicy is kept as observed, nothing is deleted.",
			xr:       accessXR("ci-pipeline"),
			observed: observedAccess(policyAccepted, mergedWith),
			gateway:  gatewayAuth("None"),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_FALSE/AccessNotEnforceable"},
				Resources:  routeReadiness(allAccess, allAccess...),
				XRReady:    "READY_FALSE",
			}},
		},
		"GatewayAuthNotReported": {
			reason:  "A gateway that has not written status.auth yet: waiting for it, nothing composed.",
			xr:      accessXR("ci-pipeline"),
			gateway: gatewayAuth(""),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_FALSE/WaitingForGateway"},
				Resources:  map[string]string{},
				XRReady:    "READY_FALSE",
			}, message: []string{"has not reported its caller authentication (status.auth)"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, newRequest(t, tc.xr, tc.observed, map[string][]obj{"gateway": tc.gateway, "secret-key-a": keyA}))
			if diff := cmp.Diff(tc.want.summary, summarize(rsp), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nRunFunction(...): -want, +got:\n%s", tc.reason, diff)
			}
			msg := condition(rsp, "RoutingReady").GetMessage()
			for _, m := range tc.want.message {
				if !strings.Contains(msg, m) {
					t.Errorf("%s\nRoutingReady message %q does not contain %q", tc.reason, msg, m)
				}
			}
		})
	}
}

// TestModelRouteAccessOverReconciles follows one route through its
// reconciles, each one's desired Objects applied and synced by the
// provider before the next: the SecurityPolicy as composed, kept while
// the gateway turns open, and gone once spec.access is removed.
func TestModelRouteAccessOverReconciles(t *testing.T) {
	wantPolicy := obj{
		"apiVersion": "gateway.envoyproxy.io/v1alpha1",
		"kind":       "SecurityPolicy",
		"metadata":   obj{"name": "qwen-access", "namespace": teamNS},
		"spec": obj{
			"targetRefs": []any{obj{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "qwen"}},
			"mergeType":  "StrategicMerge",
			"authorization": obj{
				"defaultAction": "Deny",
				"rules": []any{obj{
					"name": "spec-access-callers", "action": "Allow",
					"principal": obj{"headers": []any{obj{"name": "x-modelplane-caller", "values": []any{"ci-pipeline", "notebook"}}}},
				}},
			},
		},
	}
	open := obj{"callers": []any{"notebook", "ci-pipeline"}}
	steps := []struct {
		reason  string
		access  obj
		gateway []obj
		// policy is the desired SecurityPolicy's manifest, nil for none.
		policy obj
		// condition is RoutingReady as "Status/Reason".
		condition string
	}{
		{reason: "Composed from the first reconcile, the callers sorted, while the backend's objects arrive.", access: open, gateway: gatewayAuth("APIKey", "ci-pipeline", "notebook"), policy: wantPolicy, condition: "STATUS_CONDITION_FALSE/WaitingForBackends"},
		{reason: "The same on the next reconcile, the route composed: nothing to change.", access: open, gateway: gatewayAuth("APIKey", "ci-pipeline", "notebook"), policy: wantPolicy, condition: "STATUS_CONDITION_FALSE/WaitingForRoute"},
		{reason: "The gateway turns open: the policy is kept as observed, the route says why.", access: open, gateway: gatewayAuth("None"), policy: wantPolicy, condition: "STATUS_CONDITION_FALSE/AccessNotEnforceable"},
		{reason: "spec.access removed: no policy desired, so Crossplane deletes it.", gateway: gatewayAuth("None"), condition: "STATUS_CONDITION_FALSE/WaitingForRoute"},
	}
	var observed map[string]obj
	for i, s := range steps {
		xr := routeXR(backend("b", 0, 1, ""))
		if s.access != nil {
			xr["spec"].(obj)["access"] = s.access
		}
		rsp := run(t, newRequest(t, xr, observed, map[string][]obj{"gateway": s.gateway}))
		if diff := cmp.Diff(s.policy, manifest(rsp, "access")); diff != "" {
			t.Errorf("step %d: %s\nthe access SecurityPolicy: -want, +got:\n%s", i, s.reason, diff)
		}
		c := condition(rsp, "RoutingReady")
		if got := c.GetStatus().String() + "/" + c.GetReason(); got != s.condition {
			t.Errorf("step %d: %s\nRoutingReady: want %s, got %s: %s", i, s.reason, s.condition, got, c.GetMessage())
		}
		observed = settle(t, rsp)
	}
	if _, ok := observed["access"]; ok {
		t.Error("spec.access removed, and the access SecurityPolicy is still desired")
	}
}
