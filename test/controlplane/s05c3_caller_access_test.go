package controlplane

import (
	"context"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// Scenario 5c3: which callers may use which model (spec.access).
const (
	// accessOpenRoute is a second ModelRoute on the gateway, which no
	// spec.access restricts.
	accessOpenRoute = "open-model"
	// rbacFilter is Envoy's RBAC filter, into which Envoy Gateway puts a
	// SecurityPolicy's authorization (gateway v1.8.3
	// internal/xds/translator/authorization.go).
	rbacFilter = "envoy.filters.http.rbac"
)

// callerAccess is scenario 5c3. With caller auth and budgets on (Envoy
// Gateway kept rate limiting from 5c2), the main route is restricted to
// one caller: Envoy must be told, on that model's route only, to let
// through the one client ID api_key_auth forwards in x-modelplane-caller,
// after api_key_auth, which stays on the route (the route's policy is
// merged into the gateway's, not put in its place); the other model's
// route, and /healthz, have no such rule; the budgets' rate limits and the
// caller header checks still hold. Then the restriction goes, and with it
// the rule. Finally auth and budgets go, as 5c2 leaves them.
func (sc *scenarios) callerAccess(t *testing.T) {
	copyName := sc.authAndBudgetsOn(t, "sk-access-")
	sc.c.Apply(sc.ctx, plainRoute(accessOpenRoute, "open.example.com"))
	sc.eventually(t, waitRoute, "both ModelRoutes RoutingReady behind caller auth", func(ctx context.Context) string {
		for _, n := range []string{harness.RouteName, accessOpenRoute} {
			xr, err := sc.get(ctx, harness.GVRModelRoute, harness.TeamControlNS, n)
			if err != nil {
				return err.Error()
			}
			if s := wantCondition(xr, "RoutingReady", "True"); s != "" {
				return n + ": " + s
			}
		}
		return ""
	})
	restricted, open := sc.routeModel(t, harness.RouteName), sc.routeModel(t, accessOpenRoute)

	sc.patchRoute(t, harness.RouteName, `{"spec":{"access":{"callers":["alice"]}}}`)
	policy := names.AccessPolicy(harness.RouteName)
	sc.eventually(t, waitRoute, "the access SecurityPolicy accepted", func(ctx context.Context) string {
		p, err := sc.get(ctx, harness.GVREGSecurityPolicy, sc.w.TeamNS, policy)
		if err != nil {
			return err.Error()
		}
		return acceptedNow(p, "the access SecurityPolicy")
	})
	// What Envoy is told, before what the route says: Envoy Gateway
	// accepts a policy it does not merge too, and the xDS shows it.
	sc.readXDS(t, "scenario-access", all(
		checkAccess(restricted, []string{"alice"}, open),
		checkCallerAuth([]string{"alice", "bob", ciCaller}),
		checkCallerHeaderRemovedEarly,
		checkBudgets,
		checkAIGatewayFilters,
	))
	sc.eventually(t, waitRoute, "the restricted route RoutingReady", func(ctx context.Context) string {
		return wantCondition(sc.routeXR(ctx), "RoutingReady", "True")
	})

	// The restriction goes: no model route keeps the rule.
	sc.w.Allow(harness.Allowance{Reason: "spec.access removed: its SecurityPolicy goes", Resource: "securitypolicies", Namespace: sc.w.TeamNS, Name: policy})
	if o := sc.composedObject(sc.ctx, harness.TeamControlNS, harness.RouteName, "access"); o != nil {
		sc.w.Allow(harness.Allowance{Reason: "spec.access removed: its Object goes", Resource: "objects", Namespace: harness.TeamControlNS, Name: o.GetName()})
	}
	sc.patchRoute(t, harness.RouteName, `{"spec":{"access":null}}`)
	sc.readXDS(t, "scenario-access-off", all(checkAccess("", nil, restricted, open), checkCallerAuth([]string{"alice", "bob", ciCaller})))

	sc.deleteRoute(t, accessOpenRoute, "scenario 5c3 deletes its second route")
	sc.authAndBudgetsOff(t, copyName)
	sc.noDeletions(t)
	sc.w.Check(t)
}

// patchRoute merge-patches a ModelRoute of the team namespace.
func (sc *scenarios) patchRoute(t *testing.T, name, patch string) {
	t.Helper()
	_, err := sc.c.Dyn.Resource(harness.GVRModelRoute).Namespace(harness.TeamControlNS).Patch(sc.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	harness.Must(t, err)
}

// checkAccess: the route of the model restricted lets through exactly the
// callers, by x-modelplane-caller, in Envoy's RBAC (Envoy Gateway's
// authorization: gateway v1.8.3 internal/xds/translator/authorization.go),
// and the HTTP connection manager runs RBAC after api_key_auth, which sets
// that header from the key (internal/xds/translator/httpfilters.go,
// newOrderedHTTPFilter); the routes of the open models have no RBAC of
// their own, and /healthz does not match callers. restricted "" checks only the open ones.
func checkAccess(restricted string, callers []string, open ...string) func(xdsDump) string {
	return func(d xdsDump) string {
		if restricted != "" {
			r, rc := d.modelRoute(restricted)
			if r == nil {
				return "no route for the model " + restricted + " yet"
			}
			pf := perFilter(r, rbacFilter)
			if pf == nil || pf["disabled"] == true {
				return fmt.Sprintf("route %v of the restricted model: no %s config: %v", r["name"], rbacFilter, pf)
			}
			if got := headerValues(pf, names.CallerHeader); !slices.Equal(got, callers) {
				return fmt.Sprintf("route %v of the restricted model lets through %s %v, want %v", r["name"], names.CallerHeader, got, callers)
			}
			for _, h := range d.hcms() {
				if hrc, _, _ := unstructured.NestedString(h.config, "rds", "route_config_name"); hrc != rc {
					continue
				}
				rb, ak := h.filterIndex(rbacFilter), h.filterIndex(apiKeyAuthFilter)
				if rb < 0 || ak < 0 || rb < ak {
					return fmt.Sprintf("listener %s: %s at %d, want after %s (%d)", h.listener, rbacFilter, rb, apiKeyAuthFilter, ak)
				}
			}
		}
		for _, m := range open {
			r, _ := d.modelRoute(m)
			if r == nil {
				return "no route for the model " + m + " yet"
			}
			if pf := perFilter(r, rbacFilter); pf != nil && pf["disabled"] != true {
				return fmt.Sprintf("route %v of the open model %s has a %s config: %v", r["name"], m, rbacFilter, pf)
			}
		}
		// /healthz has the front door's RBAC, which allows everyone
		// (internal/gateway/frontdoor.go), and never the caller rule.
		for _, r := range d.routes() {
			if p, _, _ := unstructured.NestedString(r, "match", "path"); p == "/healthz" && len(headerValues(perFilter(r, rbacFilter), names.CallerHeader)) > 0 {
				return fmt.Sprintf("route %v: /healthz matches callers: %v", r["name"], perFilter(r, rbacFilter))
			}
		}
		return ""
	}
}

// headerValues are the exact values that the single predicates of an
// RBAC matcher tree match in header, sorted: Envoy Gateway matches a
// header principal with an HttpRequestHeaderMatchInput and an exact
// string match per value (gateway v1.8.3
// internal/xds/translator/authorization.go, buildHeaderPredicate).
func headerValues(v any, header string) []string {
	var preds []map[string]any
	collect(v, "single_predicate", &preds)
	var out []string
	for _, sp := range preds {
		if h, _, _ := unstructured.NestedString(sp, "input", "typed_config", "header_name"); h != header {
			continue
		}
		if e, ok, _ := unstructured.NestedString(sp, "value_match", "exact"); ok && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return out
}

// authAndBudgetsOn turns on caller auth, with the callers alice, bob and
// the ci caller (keys made with prefix), and 5c2's budgets, and returns
// once the gateway is GatewayReady with both: Envoy Gateway runs with
// rate limiting since 5c2. It returns the callers' copy's name.
func (sc *scenarios) authAndBudgetsOn(t *testing.T, prefix string) string {
	t.Helper()
	key := sc.w.CallerKeys(prefix)
	sc.putCallers(t, callersSecret, map[string]any{"alice": key("alice"), "bob": key("bob"), ciCaller: key(ciCaller)})
	copyName := names.CallerSecret(harness.GatewayXRName, callersSecret)
	sc.patchGateway(t, `{"spec":{"auth":{"method":"APIKey","apiKey":{"secretSelector":{"matchLabels":{"`+callersLabel+`":"`+callersLabelTrue+`"}}}},"budgets":`+budgetsJSON()+`}}`)
	sc.eventually(t, waitRoute, "GatewayReady=True with caller auth and budgets", func(ctx context.Context) string {
		if s := sc.gatewayAuthReady(ctx, []string{copyName}, 3); s != "" {
			return s
		}
		return sc.trafficPolicyAccepted(ctx)
	})
	return copyName
}

// budgetsJSON is 5c2's spec.budgets: each caller budgetPerModel total
// tokens an hour on each model, the ci caller budgetCI, and
// budgetAllModels output tokens a day across all models.
func budgetsJSON() string {
	return fmt.Sprintf(`[{"tokens":"Total","limit":%d,"per":"Hour","callers":[{"name":%q,"limit":%d}]},{"tokens":"Output","limit":%d,"per":"Day","scope":"AllModels"}]`,
		budgetPerModel, ciCaller, budgetCI, budgetAllModels)
}
