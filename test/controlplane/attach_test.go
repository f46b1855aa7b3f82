package controlplane

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
)

// parentStatus returns the status.parents entry Envoy Gateway wrote on an
// HTTPRoute for the Gateway ns/name, or nil.
func parentStatus(hr *unstructured.Unstructured, ns, name string) map[string]any {
	parents, _, _ := unstructured.NestedSlice(hr.Object, "status", "parents")
	for _, x := range parents {
		p, _ := x.(map[string]any)
		ref, _ := p["parentRef"].(map[string]any)
		refNS, _ := ref["namespace"].(string)
		if refNS == "" {
			refNS = hr.GetNamespace()
		}
		if p["controllerName"] == egControllerName && ref["name"] == name && refNS == ns {
			return p
		}
	}
	return nil
}

// parentCondition returns "status (reason)" of a condition in a
// status.parents entry.
func parentCondition(p map[string]any, typ string) string {
	conds, _ := p["conditions"].([]any)
	for _, x := range conds {
		c, _ := x.(map[string]any)
		if c["type"] == typ {
			return fmt.Sprintf("%v (%v)", c["status"], c["reason"])
		}
	}
	return "none"
}

// routesAttached checks what the Gateway the function composed makes of
// the HTTPRoutes AI Gateway generates. The model's, in the team namespace
// its listeners admit by label, is Accepted and resolves every
// backendRef, one per backend of the AIGatewayRoute's rule, each an Envoy
// Gateway Backend. The anchor's, in the gateway namespace, which no
// listener admits, is not accepted: NotAllowedByListeners, as Envoy
// Gateway v1.8.3 says of it (internal/gatewayapi/route.go,
// processAllowedListenersForParentRefs).
func (sc *scenarios) routesAttached(t *testing.T) {
	t.Helper()
	sc.eventually(t, waitSettle, "the model's HTTPRoute accepted by the Gateway with every ref resolved", func(ctx context.Context) string {
		ar, err := sc.get(ctx, gvrAIRoute, sc.w.teamNS, routeName)
		if err != nil {
			return err.Error()
		}
		hr, err := sc.get(ctx, gvrHTTPRoute, sc.w.teamNS, routeName)
		if err != nil {
			return err.Error()
		}
		if owner := hr.GetOwnerReferences(); len(owner) != 1 || owner[0].Kind != "AIGatewayRoute" || owner[0].UID != ar.GetUID() {
			return fmt.Sprintf("the HTTPRoute is owned by %v, want its AIGatewayRoute", owner)
		}
		aiRules, _, _ := unstructured.NestedSlice(ar.Object, "spec", "rules")
		rules, _, _ := unstructured.NestedSlice(hr.Object, "spec", "rules")
		if len(rules) != len(aiRules)+1 {
			return fmt.Sprintf("the HTTPRoute has %d rules, want the AIGatewayRoute's %d and route-not-found", len(rules), len(aiRules))
		}
		for i, x := range aiRules {
			aiBRs, _ := x.(map[string]any)["backendRefs"].([]any)
			brs, _ := rules[i].(map[string]any)["backendRefs"].([]any)
			if len(brs) != len(aiBRs) {
				return fmt.Sprintf("HTTPRoute rule %d has %d backendRefs, want the AIGatewayRoute rule's %d", i, len(brs), len(aiBRs))
			}
			for _, y := range brs {
				if br, _ := y.(map[string]any); br["group"] != "gateway.envoyproxy.io" || br["kind"] != "Backend" {
					return fmt.Sprintf("HTTPRoute rule %d refers to %v, want Envoy Gateway Backends", i, br)
				}
			}
		}
		p := parentStatus(hr, gatewayNS, gatewayXRName)
		if p == nil {
			return "no status.parents entry for the Gateway " + gatewayNS + "/" + gatewayXRName
		}
		if a, r := parentCondition(p, "Accepted"), parentCondition(p, "ResolvedRefs"); a != "True (Accepted)" || r != "True (ResolvedRefs)" {
			return fmt.Sprintf("Accepted=%s, ResolvedRefs=%s", a, r)
		}
		return ""
	})
	anchor := names.AnchorRoute(gatewayXRName)
	sc.eventually(t, waitSettle, "the anchor's HTTPRoute refused by every listener", func(ctx context.Context) string {
		hr, err := sc.get(ctx, gvrHTTPRoute, gatewayNS, anchor)
		if err != nil {
			return err.Error()
		}
		p := parentStatus(hr, gatewayNS, gatewayXRName)
		if p == nil {
			return "no status.parents entry for the Gateway"
		}
		if a := parentCondition(p, "Accepted"); a != "False (NotAllowedByListeners)" {
			return "Accepted=" + a
		}
		return ""
	})
}
