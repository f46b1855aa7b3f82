package controlplane

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// This file holds the route and policy halves of the Envoy Gateway and AI
// Gateway stand-ins: the HTTPRoute AI Gateway generates for every
// AIGatewayRoute, and the status Envoy Gateway writes on HTTPRoutes and on
// traffic policies. Each follows the upstream source named in its comment
// and does nothing more; no code is copied.

// Names and values of AI Gateway v1.0.0's generated HTTPRoute
// (internal/controller/ai_gateway_route.go and internal/internalapi).
const (
	aigHostRewriteFilter   = "ai-eg-host-rewrite"
	aigRouteNotFoundFilter = "ai-eg-route-not-found-response"
	aigRouteNotFoundRule   = "route-not-found"
	aigPriorityAnnotation  = "gateway.envoyproxy.io/backend-ref-priority"
	aigGeneratedAnnotation = "gateway.envoyproxy.io/ai-gateway-generated"
	// aigRootPrefix is the controller's --rootPrefix default
	// (cmd/controller/main.go).
	aigRootPrefix = "/"
	// aigDefaultTimeout is AIGatewayRouteRule.GetTimeoutsOrDefault's
	// request timeout (api/v1beta1/ai_gateway_route_helper.go).
	aigDefaultTimeout = "60s"
)

// syncRoute is AI Gateway v1.0.0's AIGatewayRouteController.Reconcile for
// one route (internal/controller/ai_gateway_route.go): make sure the two
// HTTPRouteFilters the route's rules refer to exist, build the HTTPRoute
// of the same name and namespace (newHTTPRoute), create or update it
// owned by the route, check that every parent Gateway exists
// (syncGateways), and set one condition: Accepted True
// (ReconciliationSucceeded) when all of that worked, else NotAccepted
// False (ReconciliationFailed) with the error (controller.go,
// newConditions). The API server validates the HTTPRoute against the real
// Gateway API CRD, so a rule with more than 16 backendRefs is refused and
// the route is not accepted, as upstream. Left out: the finalizer
// (handleFinalizer), InferencePool and cross-namespace backendRefs, which
// the function never composes, and the event to the gateway controller.
// Upstream writes the condition on every reconcile; the stand-in writes
// it when it changes, so that it does not stir the provider's watches.
func (a *aiGateway) syncRoute(ctx context.Context, r *unstructured.Unstructured) error {
	typ, status, reason, msg := "Accepted", "True", "ReconciliationSucceeded", "AI Gateway Route reconciled successfully"
	if err := a.generate(ctx, r); err != nil {
		typ, status, reason, msg = "NotAccepted", "False", "ReconciliationFailed", err.Error()
	}
	conds, _, _ := unstructured.NestedSlice(r.Object, "status", "conditions")
	if len(conds) == 1 {
		c, _ := conds[0].(map[string]any)
		if c["type"] == typ && c["status"] == status && c["message"] == msg {
			return nil
		}
	}
	cur := r.DeepCopy()
	if err := unstructured.SetNestedSlice(cur.Object, []any{map[string]any{
		"type": typ, "status": status, "reason": reason, "message": msg,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}}, "status", "conditions"); err != nil {
		return err
	}
	_, err := a.c.dyn.Resource(gvrAIRoute).Namespace(cur.GetNamespace()).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("cannot set the status of AIGatewayRoute %s/%s: %w", cur.GetNamespace(), cur.GetName(), err)
	}
	if err == nil {
		a.c.tb.Logf("AI Gateway stand-in: AIGatewayRoute %s/%s %s=%s: %s", cur.GetNamespace(), cur.GetName(), typ, status, msg)
	}
	return nil
}

// controllerRef is the owner reference controller-runtime's
// SetControllerReference writes for an AIGatewayRoute.
func controllerRef(owner *unstructured.Unstructured) map[string]any {
	return map[string]any{
		"apiVersion": "aigateway.envoyproxy.io/v1beta1", "kind": "AIGatewayRoute", "name": owner.GetName(), "uid": string(owner.GetUID()),
		"controller": true, "blockOwnerDeletion": true,
	}
}

// generate is syncAIGatewayRoute after the finalizer: the filters, the
// HTTPRoute and the parent check. Its errors read as upstream's do.
func (a *aiGateway) generate(ctx context.Context, r *unstructured.Unstructured) error {
	ns, name := r.GetNamespace(), r.GetName()
	for _, f := range []struct {
		name string
		spec map[string]any
	}{
		{aigHostRewriteFilter + "-" + name, map[string]any{"urlRewrite": map[string]any{"hostname": map[string]any{"type": "Backend"}}}},
		{aigRouteNotFoundFilter + "-" + name, map[string]any{"directResponse": map[string]any{
			"statusCode": int64(404),
			"body":       map[string]any{"inline": "No matching route found. It is likely because the model specified in your request is not configured in the Gateway."},
		}}},
	} {
		_, err := a.c.dyn.Resource(gvrRouteFilter).Namespace(ns).Get(ctx, f.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = a.c.dyn.Resource(gvrRouteFilter).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "HTTPRouteFilter",
				"metadata": map[string]any{"name": f.name, "namespace": ns, "ownerReferences": []any{controllerRef(r)}},
				"spec":     f.spec,
			}}, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("failed to create HTTPRouteFilter %s: %w", f.name, err)
			}
		} else if err != nil {
			return fmt.Errorf("failed to get HTTPRouteFilter %s: %w", f.name, err)
		}
	}

	spec, err := a.httpRouteSpec(ctx, r)
	if err != nil {
		return fmt.Errorf("failed to construct a new HTTPRoute: %w", err)
	}
	annotations := map[string]any{}
	for k, v := range r.GetAnnotations() {
		annotations[k] = v
	}
	annotations[aigPriorityAnnotation] = priorityAnnotation(r)
	annotations[aigGeneratedAnnotation] = "true"
	routeLabels := map[string]any{}
	for k, v := range r.GetLabels() {
		routeLabels[k] = v
	}

	hr, err := a.c.dyn.Resource(gvrHTTPRoute).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		hr = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
			"metadata": map[string]any{
				"name": name, "namespace": ns, "labels": routeLabels, "annotations": annotations,
				"ownerReferences": []any{controllerRef(r)},
			},
			"spec": spec,
		}}
		if _, err := a.c.dyn.Resource(gvrHTTPRoute).Namespace(ns).Create(ctx, hr, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("failed to create HTTPRoute: %w", err)
		}
	case err != nil:
		return fmt.Errorf("failed to get HTTPRoute: %w", err)
	default:
		// Upstream replaces the rules, parentRefs and hostnames and adds
		// the route's labels and annotations, then updates. An update that
		// changes nothing is not written, so it wakes no watch.
		md, _ := hr.Object["metadata"].(map[string]any)
		for k, v := range routeLabels {
			_ = unstructured.SetNestedField(md, v, "labels", k)
		}
		for k, v := range annotations {
			_ = unstructured.SetNestedField(md, v, "annotations", k)
		}
		old, _ := hr.Object["spec"].(map[string]any)
		if old == nil {
			old = map[string]any{}
		}
		maps.Copy(old, spec)
		for _, k := range []string{"parentRefs", "hostnames"} {
			if _, ok := spec[k]; !ok {
				delete(old, k)
			}
		}
		hr.Object["spec"] = old
		if _, err := a.c.dyn.Resource(gvrHTTPRoute).Namespace(ns).Update(ctx, hr, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("failed to update HTTPRoute: %w", err)
		}
	}

	refs, _, _ := unstructured.NestedSlice(r.Object, "spec", "parentRefs")
	for _, x := range refs {
		ref, _ := x.(map[string]any)
		gwNS, _ := ref["namespace"].(string)
		if gwNS == "" {
			gwNS = ns
		}
		gwName, _ := ref["name"].(string)
		if _, err := a.c.dyn.Resource(gvrGateway).Namespace(gwNS).Get(ctx, gwName, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("failed to sync gw pods: gateway %s/%s not found: %w", gwNS, gwName, err)
			}
			return fmt.Errorf("failed to sync gw pods: failed to get Gateway %s/%s: %w", gwNS, gwName, err)
		}
	}
	return nil
}

// httpRouteSpec is newHTTPRoute's spec: one HTTPRoute rule per
// AIGatewayRoute rule, whose backendRefs are the backendRefs of the
// AIServiceBackends the rule names (each with the rule's weight), whose
// matches are the rule's header matches under the root prefix, with the
// host-rewrite filter and the rule's timeouts (60 s by default); then the
// catch-all route-not-found rule; and the route's parentRefs and hostnames.
func (a *aiGateway) httpRouteSpec(ctx context.Context, r *unstructured.Unstructured) (map[string]any, error) {
	ns := r.GetNamespace()
	rewrite := []any{map[string]any{"type": "ExtensionRef", "extensionRef": map[string]any{
		"group": "gateway.envoyproxy.io", "kind": "HTTPRouteFilter", "name": aigHostRewriteFilter + "-" + r.GetName(),
	}}}
	aiRules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
	rules := make([]any, 0, len(aiRules)+1)
	for _, x := range aiRules {
		rule, _ := x.(map[string]any)
		var brs []any
		aiRefs, _ := rule["backendRefs"].([]any)
		for _, y := range aiRefs {
			br, _ := y.(map[string]any)
			if g, _ := br["group"].(string); g != "" {
				return nil, fmt.Errorf("the AI Gateway stand-in does not model backendRefs of group %q", g)
			}
			name, _ := br["name"].(string)
			if bns, _ := br["namespace"].(string); bns != "" && bns != ns {
				return nil, fmt.Errorf("the AI Gateway stand-in does not model cross-namespace backendRefs (%s.%s)", name, bns)
			}
			asb, err := a.c.dyn.Resource(gvrAIBackend).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("failed to get AIServiceBackend %s.%s: AIServiceBackend %s.%s not found", name, ns, name, ns)
			}
			ref, _, _ := unstructured.NestedMap(asb.Object, "spec", "backendRef")
			hbr := map[string]any{}
			maps.Copy(hbr, ref)
			if w, ok := br["weight"]; ok {
				hbr["weight"] = w
			}
			brs = append(brs, hbr)
		}
		var matches []any
		aiMatches, _ := rule["matches"].([]any)
		for _, y := range aiMatches {
			m, _ := y.(map[string]any)
			hm := map[string]any{"path": map[string]any{"value": aigRootPrefix}}
			if h, ok := m["headers"]; ok {
				hm["headers"] = h
			}
			matches = append(matches, hm)
		}
		timeouts, _ := rule["timeouts"].(map[string]any)
		if timeouts == nil {
			timeouts = map[string]any{}
		}
		if _, ok := timeouts["request"]; !ok {
			timeouts = mapWith(timeouts, "request", aigDefaultTimeout)
		}
		hr := map[string]any{"filters": rewrite, "timeouts": timeouts}
		if brs != nil {
			hr["backendRefs"] = brs
		}
		if matches != nil {
			hr["matches"] = matches
		}
		rules = append(rules, hr)
	}
	rules = append(rules, map[string]any{
		"name":    aigRouteNotFoundRule,
		"matches": []any{map[string]any{"path": map[string]any{"value": aigRootPrefix}}},
		"filters": []any{map[string]any{"type": "ExtensionRef", "extensionRef": map[string]any{
			"group": "gateway.envoyproxy.io", "kind": "HTTPRouteFilter", "name": aigRouteNotFoundFilter + "-" + r.GetName(),
		}}},
	})
	spec := map[string]any{"rules": rules}
	if p, ok, _ := unstructured.NestedSlice(r.Object, "spec", "parentRefs"); ok {
		spec["parentRefs"] = p
	}
	if h, ok, _ := unstructured.NestedSlice(r.Object, "spec", "hostnames"); ok {
		spec["hostnames"] = h
	}
	return spec, nil
}

// mapWith returns a copy of m with k set to v.
func mapWith(m map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	maps.Copy(out, m)
	out[k] = v
	return out
}

// priorityAnnotation is buildPriorityAnnotation: rule:backend:priority for
// every backendRef, comma-separated.
func priorityAnnotation(r *unstructured.Unstructured) string {
	rules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
	var out []string
	for i, x := range rules {
		rule, _ := x.(map[string]any)
		brs, _ := rule["backendRefs"].([]any)
		for _, y := range brs {
			br, _ := y.(map[string]any)
			name, _ := br["name"].(string)
			out = append(out, fmt.Sprintf("%d:%s:%d", i, name, int64At(br, "priority")))
		}
	}
	return strings.Join(out, ",")
}

// egGateways returns the Gateways Envoy Gateway handles: those of a
// GatewayClass with its controllerName, not being deleted.
func (e *envoyGateway) egGateways(ctx context.Context, gws []unstructured.Unstructured) (map[types.NamespacedName]*unstructured.Unstructured, error) {
	out := map[types.NamespacedName]*unstructured.Unstructured{}
	for i := range gws {
		gw := &gws[i]
		if gw.GetDeletionTimestamp() != nil {
			continue
		}
		className, _, _ := unstructured.NestedString(gw.Object, "spec", "gatewayClassName")
		class, err := e.c.dyn.Resource(gvrGatewayClass).Get(ctx, className, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cannot get GatewayClass %s: %w", className, err)
		}
		if ctrl, _, _ := unstructured.NestedString(class.Object, "spec", "controllerName"); ctrl == egControllerName {
			out[types.NamespacedName{Namespace: gw.GetNamespace(), Name: gw.GetName()}] = gw
		}
	}
	return out, nil
}

// listeners returns a Gateway's spec.listeners.
func listeners(gw *unstructured.Unstructured) []map[string]any {
	ls, _, _ := unstructured.NestedSlice(gw.Object, "spec", "listeners")
	out := make([]map[string]any, 0, len(ls))
	for _, x := range ls {
		if l, ok := x.(map[string]any); ok {
			out = append(out, l)
		}
	}
	return out
}

// policyStatus sets status.ancestors on every ClientTrafficPolicy,
// BackendTrafficPolicy and SecurityPolicy (whose translation it then
// judges, securitypolicy_test.go) the way Envoy Gateway v1.8.1 does for a policy
// that targets a Gateway (internal/gatewayapi/clienttrafficpolicy.go,
// ProcessClientTrafficPolicies; backendtrafficpolicy.go,
// processBackendTrafficPolicyForGateway; status/policy.go). A targetRef
// whose Gateway Envoy Gateway does not handle, or that does not exist,
// gets no ancestor at all (resolve...TargetRef returns no gateway and the
// policy is skipped). For one that exists: ancestorRef group
// gateway.networking.k8s.io, kind Gateway, the Gateway's namespace and
// name, and the targetRef's sectionName (helpers.go,
// getAncestorRefForPolicy); Accepted True, reason Accepted, "Policy has
// been accepted.", or Accepted False, reason TargetNotFound, when the
// sectionName names no listener (validate.go,
// validateGatewayListenerSectionName). Left out: targetSelectors, route
// targets, and the Conflicted, Overridden and Merged conditions of several
// policies on one target, which the function never composes.
func (e *envoyGateway) policyStatus(ctx context.Context, gws map[types.NamespacedName]*unstructured.Unstructured) error {
	for _, gvr := range []schema.GroupVersionResource{gvrClientPolicy, gvrTrafficPolicy, gvrSecurityPolicy} {
		l, err := e.c.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("cannot list %s: %w", gvr.Resource, err)
		}
		for i := range l.Items {
			p := &l.Items[i]
			var ours []any
			for _, t := range policyTargets(p) {
				if t["group"] != "gateway.networking.k8s.io" || t["kind"] != "Gateway" {
					continue
				}
				name, _ := t["name"].(string)
				key := types.NamespacedName{Namespace: p.GetNamespace(), Name: name}
				gw, ok := gws[key]
				if !ok {
					continue
				}
				ref := map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": key.Namespace, "name": key.Name}
				cond := map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "Policy has been accepted."}
				if sn, _ := t["sectionName"].(string); sn != "" {
					ref["sectionName"] = sn
					if !slices.ContainsFunc(listeners(gw), func(l map[string]any) bool { return l["name"] == sn }) {
						cond = map[string]any{"type": "Accepted", "status": "False", "reason": "TargetNotFound",
							"message": fmt.Sprintf("No section name %s found for Gateway %s", sn, key)}
					}
				}
				if gvr == gvrSecurityPolicy && cond["status"] == "True" {
					// A SecurityPolicy is also translated, and rejected
					// by its translation errors (securitypolicy_test.go).
					if err := translateSecurityPolicy(p, e.secretData(ctx)); err != nil {
						cond = map[string]any{"type": "Accepted", "status": "False", "reason": "Invalid", "message": conditionMessage(err)}
					}
				}
				cond["observedGeneration"] = p.GetGeneration()
				ours = append(ours, map[string]any{"ancestorRef": ref, "controllerName": egControllerName, "conditions": []any{cond}})
			}
			if err := e.writeOwnStatus(ctx, gvr, p, "ancestors", "ancestorRef", ours); err != nil {
				return err
			}
		}
	}
	return nil
}

// policyTargets returns a policy's targetRefs, and its deprecated
// singular targetRef, each as a map.
func policyTargets(p *unstructured.Unstructured) []map[string]any {
	var out []map[string]any
	if t, ok, _ := unstructured.NestedMap(p.Object, "spec", "targetRef"); ok {
		out = append(out, t)
	}
	ts, _, _ := unstructured.NestedSlice(p.Object, "spec", "targetRefs")
	for _, x := range ts {
		if t, ok := x.(map[string]any); ok {
			out = append(out, t)
		}
	}
	return out
}

// routeStatus sets status.parents on every HTTPRoute, for each parentRef
// naming a Gateway Envoy Gateway handles, the way Envoy Gateway v1.8.1
// does (internal/gatewayapi/route.go, processAllowedListenersForParentRefs
// and processHTTPRouteParentRefs; contexts.go, AllowsNamespace). Accepted:
// False, NoMatchingParent, when the parentRef's sectionName or port picks
// no listener; False, NotAllowedByListeners, when no picked listener
// admits HTTPRoutes from the route's namespace; else True, Accepted.
// ResolvedRefs, computed for every such parentRef, accepted or not: False,
// UnsupportedValue, when a rule's HTTPRouteFilter extensionRef names none
// in the route's namespace (filters.go, processExtensionRefHTTPFilter);
// False, BackendNotFound, when a backendRef names no Envoy Gateway Backend
// or Service (validate.go, validateBackendRefBackend); else True,
// ResolvedRefs. The parentRef is written as the route spells it, under
// Envoy Gateway's controllerName (contexts.go, GetRouteParentContext).
// Left out: listener readiness (the stand-in's listeners are all ready),
// hostname intersection, ReferenceGrants, and everything about traffic.
func (e *envoyGateway) routeStatus(ctx context.Context, gws map[types.NamespacedName]*unstructured.Unstructured) error {
	l, err := e.c.dyn.Resource(gvrHTTPRoute).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("cannot list HTTPRoutes: %w", err)
	}
	for i := range l.Items {
		hr := &l.Items[i]
		if hr.GetDeletionTimestamp() != nil {
			continue
		}
		ns, err := e.c.dyn.Resource(gvrNamespace).Get(ctx, hr.GetNamespace(), metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("cannot get the namespace of HTTPRoute %s/%s: %w", hr.GetNamespace(), hr.GetName(), err)
		}
		resolved, err := e.resolvedRefs(ctx, hr)
		if err != nil {
			return err
		}
		resolved["observedGeneration"] = hr.GetGeneration()
		var ours []any
		refs, _, _ := unstructured.NestedSlice(hr.Object, "spec", "parentRefs")
		for _, x := range refs {
			ref, _ := x.(map[string]any)
			if g, ok := ref["group"].(string); ok && g != "gateway.networking.k8s.io" {
				continue
			}
			if k, ok := ref["kind"].(string); ok && k != "Gateway" {
				continue
			}
			gwNS, _ := ref["namespace"].(string)
			if gwNS == "" {
				gwNS = hr.GetNamespace()
			}
			name, _ := ref["name"].(string)
			gw, ok := gws[types.NamespacedName{Namespace: gwNS, Name: name}]
			if !ok {
				continue // not a Gateway Envoy Gateway controls: skipped upstream
			}
			accepted := acceptedBy(gw, ref, ns)
			accepted["observedGeneration"] = hr.GetGeneration()
			ours = append(ours, map[string]any{
				"parentRef": ref, "controllerName": egControllerName,
				"conditions": []any{accepted, mapWith(resolved, "type", "ResolvedRefs")},
			})
		}
		if err := e.writeOwnStatus(ctx, gvrHTTPRoute, hr, "parents", "parentRef", ours); err != nil {
			return err
		}
	}
	return nil
}

// acceptedBy is the Accepted condition a Gateway gives a parentRef of an
// HTTPRoute in the namespace ns.
func acceptedBy(gw *unstructured.Unstructured, ref map[string]any, ns *unstructured.Unstructured) map[string]any {
	var picked []map[string]any
	for _, l := range listeners(gw) {
		if sn, ok := ref["sectionName"].(string); ok && sn != l["name"] {
			continue
		}
		if _, ok := ref["port"]; ok && int64At(ref, "port") != int64At(l, "port") {
			continue
		}
		picked = append(picked, l)
	}
	if len(picked) == 0 {
		return map[string]any{"type": "Accepted", "status": "False", "reason": "NoMatchingParent", "message": "No listeners match this parent ref"}
	}
	for _, l := range picked {
		if admitsHTTPRoute(l) && admitsNamespace(l, gw.GetNamespace(), ns) {
			return map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "Route is accepted"}
		}
	}
	return map[string]any{"type": "Accepted", "status": "False", "reason": "NotAllowedByListeners",
		"message": "No listeners included by this parent ref allowed this attachment."}
}

// admitsHTTPRoute: a listener without allowedRoutes.kinds takes the kinds
// of its protocol, HTTPRoute for HTTP and HTTPS.
func admitsHTTPRoute(l map[string]any) bool {
	kinds, _, _ := unstructured.NestedSlice(l, "allowedRoutes", "kinds")
	if len(kinds) == 0 {
		p, _ := l["protocol"].(string)
		return p == "HTTP" || p == "HTTPS"
	}
	for _, x := range kinds {
		k, _ := x.(map[string]any)
		if g, ok := k["group"].(string); ok && g != "gateway.networking.k8s.io" {
			continue
		}
		if k["kind"] == "HTTPRoute" {
			return true
		}
	}
	return false
}

// admitsNamespace is ListenerContext.AllowsNamespace: From Same (the
// default) admits the Gateway's own namespace, All every namespace,
// Selector the namespaces whose labels match.
func admitsNamespace(l map[string]any, gwNS string, ns *unstructured.Unstructured) bool {
	from, _, _ := unstructured.NestedString(l, "allowedRoutes", "namespaces", "from")
	switch from {
	case "All":
		return true
	case "Selector":
		sel, ok, _ := unstructured.NestedMap(l, "allowedRoutes", "namespaces", "selector")
		if !ok {
			return false
		}
		ls := &metav1.LabelSelector{}
		if err := fromUnstructured(&unstructured.Unstructured{Object: sel}, ls); err != nil {
			return false
		}
		s, err := metav1.LabelSelectorAsSelector(ls)
		return err == nil && s.Matches(labels.Set(ns.GetLabels()))
	default:
		return ns.GetName() == gwNS
	}
}

// resolvedRefs is the ResolvedRefs condition (without its type) of an
// HTTPRoute: the first unresolved HTTPRouteFilter or backendRef, rule by
// rule, filters before backendRefs, as processHTTPRouteRules meets them.
func (e *envoyGateway) resolvedRefs(ctx context.Context, hr *unstructured.Unstructured) (map[string]any, error) {
	ns := hr.GetNamespace()
	exists := func(gvr schema.GroupVersionResource, ns, name string) (bool, error) {
		_, err := e.c.dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}
	rules, _, _ := unstructured.NestedSlice(hr.Object, "spec", "rules")
	for ri, x := range rules {
		rule, _ := x.(map[string]any)
		filters, _ := rule["filters"].([]any)
		for _, y := range filters {
			f, _ := y.(map[string]any)
			ext, _ := f["extensionRef"].(map[string]any)
			if f["type"] != "ExtensionRef" || ext["kind"] != "HTTPRouteFilter" {
				continue
			}
			name, _ := ext["name"].(string)
			ok, err := exists(gvrRouteFilter, ns, name)
			if err != nil {
				return nil, err
			}
			if !ok {
				return map[string]any{"status": "False", "reason": "UnsupportedValue",
					"message": fmt.Sprintf("Reference %s/%s not found for filter type: HTTPRouteFilter.", ns, name)}, nil
			}
		}
		brs, _ := rule["backendRefs"].([]any)
		for bi, y := range brs {
			br, _ := y.(map[string]any)
			group, _ := br["group"].(string)
			kind, _ := br["kind"].(string)
			if kind == "" {
				kind = "Service"
			}
			bns, _ := br["namespace"].(string)
			if bns == "" {
				bns = ns
			}
			name, _ := br["name"].(string)
			var gvr schema.GroupVersionResource
			var what string
			switch {
			case group == "gateway.envoyproxy.io" && kind == "Backend":
				gvr, what = gvrBackend, "Backend"
			case group == "" && kind == "Service":
				gvr, what = gvrService, "service"
			default:
				return map[string]any{"status": "False", "reason": "InvalidKind",
					"message": fmt.Sprintf("Failed to process route rule %d backendRef %d: the stand-in models only Backend and Service backendRefs, not %s/%s.", ri, bi, group, kind)}, nil
			}
			ok, err := exists(gvr, bns, name)
			if err != nil {
				return nil, err
			}
			if !ok {
				return map[string]any{"status": "False", "reason": "BackendNotFound",
					"message": fmt.Sprintf("Failed to process route rule %d backendRef %d: %s %s/%s not found.", ri, bi, what, bns, name)}, nil
			}
		}
	}
	return map[string]any{"status": "True", "reason": "ResolvedRefs", "message": "Resolved all the Object references for the Route"}, nil
}

// writeOwnStatus replaces Envoy Gateway's entries in the status list field
// (parents or ancestors) of u with ours, keeping other controllers'
// entries, and writes it only if something other than a
// lastTransitionTime changed. A condition that keeps its status keeps its
// lastTransitionTime.
func (e *envoyGateway) writeOwnStatus(ctx context.Context, gvr schema.GroupVersionResource, u *unstructured.Unstructured, field, refKey string, ours []any) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := e.c.dyn.Resource(gvr).Namespace(u.GetNamespace()).Get(ctx, u.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		old, _, _ := unstructured.NestedSlice(cur.Object, "status", field)
		var kept, mine []any
		for _, x := range old {
			m, _ := x.(map[string]any)
			if m["controllerName"] == egControllerName {
				mine = append(mine, m)
			} else {
				kept = append(kept, m)
			}
		}
		now := time.Now().UTC().Format(time.RFC3339)
		for _, x := range ours {
			entry, _ := x.(map[string]any)
			var prev map[string]any
			for _, y := range mine {
				m, _ := y.(map[string]any)
				if reflect.DeepEqual(m[refKey], entry[refKey]) {
					prev = m
				}
			}
			conds, _ := entry["conditions"].([]any)
			for _, z := range conds {
				c, _ := z.(map[string]any)
				c["lastTransitionTime"] = now
				pc, _ := prev["conditions"].([]any)
				for _, w := range pc {
					p, _ := w.(map[string]any)
					if p["type"] == c["type"] && p["status"] == c["status"] {
						c["lastTransitionTime"] = p["lastTransitionTime"]
					}
				}
			}
		}
		if sameEntries(mine, ours) {
			return nil
		}
		// The list is required in both PolicyStatus and RouteStatus: an
		// empty one, never null.
		all := append(append([]any{}, kept...), ours...)
		if err := unstructured.SetNestedSlice(cur.Object, all, "status", field); err != nil {
			return err
		}
		_, err = e.c.dyn.Resource(gvr).Namespace(cur.GetNamespace()).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// sameEntries compares status entries as JSON values, so that int64 and
// float64 numbers from different decoders compare equal.
func sameEntries(a, b []any) bool {
	ja, err1 := jsonMarshal(a)
	jb, err2 := jsonMarshal(b)
	if err1 != nil || err2 != nil {
		return false
	}
	var x, y any
	if jsonUnmarshal(ja, &x) != nil || jsonUnmarshal(jb, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
