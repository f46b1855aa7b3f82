package fn

import (
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The tests in this file keep Envoy Gateway from ever translating the
// model's HTTPRoute with a backendRef whose Backend is missing: that makes
// the rule a weighted split over one cluster per backend, which AI Gateway
// does not recognise, so the fallback tier takes live traffic
// (route.readBackends says why).

// namedHTTPRoute is the observed HTTPRoute AI Gateway generated, accepted
// and resolved, whose one rule names the Backends refs.
func namedHTTPRoute(refs ...string) obj {
	m := httpRouteManifest(true, true)
	brs := make([]any, len(refs))
	for i, r := range refs {
		brs[i] = obj{"group": "gateway.envoyproxy.io", "kind": "Backend", "name": r, "weight": 1}
	}
	m["spec"] = obj{"rules": []any{obj{"backendRefs": brs}, obj{"name": "route-not-found"}}}
	return object("httproute", m, true, true)
}

// TestNewBackendJoinsServingRouteOncePlaced: a backend added to a route
// that exists on the gateway cluster joins it only once its Backend and
// AIServiceBackend exist there; a brand-new route is not held back.
func TestNewBackendJoinsServingRouteOncePlaced(t *testing.T) {
	abc := []obj{backend("a", 1, 1, "key-a"), backend("b", 0, 1, ""), backend("c", 0, 1, "")}
	req := map[string][]obj{"gateway": gwReady, "secret-key-a": keyA}
	// serving is observedRoute(true) routing a and b, with some Objects
	// of c's added or replaced.
	serving := func(set map[string]obj) map[string]obj {
		o := observedRoute(true)
		o["route"] = routedObject(true, "qwen-b", "qwen-a")
		maps.Copy(o, set)
		return o
	}
	live := func(n, kind string) obj { return object(n, plainManifest(kind), true, true) }
	type want struct {
		condition string
		message   string
		refs      []string
	}
	cases := map[string]struct {
		reason   string
		backends []obj
		observed map[string]obj
		want     want
	}{
		"NotCreatedYet": {
			reason:   "c is new to the serving route and its objects are not on the gateway cluster: the route keeps serving a and b, RoutingReady says c waits.",
			backends: abc,
			observed: serving(nil),
			want: want{
				condition: "RoutingReady=STATUS_CONDITION_FALSE/WaitingForBackends",
				message:   "backends c join the route once their Backend and AIServiceBackend exist on the gateway cluster",
				refs:      []string{"qwen-b:0:1", "qwen-a:1:1"},
			},
		},
		"AIServiceBackendOnly": {
			reason:   "The AIServiceBackend exists but the Backend does not: AI Gateway would copy c into the HTTPRoute and Envoy Gateway find no Backend.",
			backends: abc,
			observed: serving(map[string]obj{"aibackend-c": live("aibackend-c", "AIServiceBackend")}),
			want:     want{condition: "RoutingReady=STATUS_CONDITION_FALSE/WaitingForBackends", refs: []string{"qwen-b:0:1", "qwen-a:1:1"}},
		},
		"BackendNotSynced": {
			reason:   "The Backend Object's last observation failed: not evidence that the Backend exists.",
			backends: abc,
			observed: serving(map[string]obj{
				"backend-c":   object("backend-c", plainManifest("Backend"), false, false),
				"aibackend-c": live("aibackend-c", "AIServiceBackend"),
			}),
			want: want{condition: "RoutingReady=STATUS_CONDITION_FALSE/WaitingForBackends", refs: []string{"qwen-b:0:1", "qwen-a:1:1"}},
		},
		"Placed": {
			reason:   "Both exist: c joins tier 0 next to b.",
			backends: abc,
			observed: serving(map[string]obj{"backend-c": live("backend-c", "Backend"), "aibackend-c": live("aibackend-c", "AIServiceBackend")}),
			want:     want{condition: "RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted", refs: []string{"qwen-b:0:1", "qwen-c:0:1", "qwen-a:1:1"}},
		},
		"KeyDeliveredNotPlaced": {
			reason:   "a's key has reached the gateway cluster, but its Backend has not: a waits for the Backend, not for its key.",
			backends: abc[:2],
			observed: func() map[string]obj {
				o := observedRoute(true)
				o["route"] = routedObject(true, "qwen-b")
				delete(o, "backend-a")
				return o
			}(),
			want: want{condition: "RoutingReady=STATUS_CONDITION_FALSE/WaitingForBackends", message: "backends a join", refs: []string{"qwen-b:0:1"}},
		},
		"NewRouteNothingPlaced": {
			reason:   "No route on the gateway cluster yet and no backend's objects there: no AIGatewayRoute yet, since AI Gateway would fail on the missing AIServiceBackends and back off for minutes.",
			backends: []obj{backend("b", 0, 1, ""), backend("c", 1, 1, "")},
			observed: nil,
			want:     want{condition: "RoutingReady=STATUS_CONDITION_FALSE/WaitingForBackends"},
		},
		"NewRouteOnePlaced": {
			reason:   "A new route whose first backend's objects exist but not the second's: no AIGatewayRoute yet; it is composed whole, so it never grows in its first minutes (AI Gateway v1.0.0 panics on a route that grew past the cluster it translated).",
			backends: []obj{backend("b", 0, 1, ""), backend("c", 1, 1, "")},
			observed: placed("b"),
			want:     want{condition: "RoutingReady=STATUS_CONDITION_FALSE/WaitingForBackends"},
		},
		"NewRouteAllPlaced": {
			reason:   "A new route whose backends' objects all exist: every backend goes in at once.",
			backends: []obj{backend("b", 0, 1, ""), backend("c", 1, 1, "")},
			observed: placed("b", "c"),
			want:     want{condition: "RoutingReady=STATUS_CONDITION_FALSE/WaitingForRoute", refs: []string{"qwen-b:0:1", "qwen-c:1:1"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, newRequest(t, routeXR(tc.backends...), tc.observed, req))
			if got := summarize(rsp).Conditions[0]; got != tc.want.condition {
				t.Errorf("%s\nRoutingReady: want %s, got %s", tc.reason, tc.want.condition, got)
			}
			if msg := condition(rsp, "RoutingReady").GetMessage(); !strings.Contains(msg, tc.want.message) {
				t.Errorf("%s\nRoutingReady message %q does not contain %q", tc.reason, msg, tc.want.message)
			}
			if diff := cmp.Diff(tc.want.refs, backendRefs(t, rsp)); diff != "" {
				t.Errorf("%s\nbackendRefs: -want, +got:\n%s", tc.reason, diff)
			}
			for _, be := range tc.backends {
				n := be["name"].(string)
				for _, r := range []string{"backend-" + n, "aibackend-" + n} {
					if rsp.GetDesired().GetResources()[r] == nil {
						t.Errorf("%s\n%s is not desired: a backend's objects are composed before it joins the route", tc.reason, r)
					}
				}
			}
		})
	}
}

// TestNewBackendOverReconciles: a backend added to a serving route, with
// provider-kubernetes creating the composed Objects between reconciles.
// The route names the new backend only in the reconcile after its Backend
// and AIServiceBackend exist, whatever order the provider applies them in.
func TestNewBackendOverReconciles(t *testing.T) {
	xr := routeXR(backend("a", 1, 1, "key-a"), backend("b", 0, 1, ""), backend("c", 0, 1, ""))
	req := map[string][]obj{"gateway": gwReady, "secret-key-a": keyA}
	observed := observedRoute(true)
	observed["route"] = routedObject(true, "qwen-b", "qwen-a")

	// Reconcile 1: c's objects are composed, the route does not name c.
	rsp := run(t, newRequest(t, xr, observed, req))
	if diff := cmp.Diff([]string{"qwen-b:0:1", "qwen-a:1:1"}, backendRefs(t, rsp)); diff != "" {
		t.Errorf("reconcile 1: backendRefs: -want, +got:\n%s", diff)
	}
	// The provider applies the route and the AIServiceBackend first; the
	// Backend's create has not happened yet.
	observed["route"] = providerSyncs(t, applyDesired(t, observed["route"], rsp, "route"))
	observed["aibackend-c"] = providerSyncs(t, applyDesired(t, nil, rsp, "aibackend-c"))
	observed["backend-c"] = applyDesired(t, nil, rsp, "backend-c")

	// Reconcile 2: still without c.
	rsp = run(t, newRequest(t, xr, observed, req))
	if diff := cmp.Diff([]string{"qwen-b:0:1", "qwen-a:1:1"}, backendRefs(t, rsp)); diff != "" {
		t.Errorf("reconcile 2: backendRefs: -want, +got:\n%s", diff)
	}
	if got := summarize(rsp).Conditions[0]; got != "RoutingReady=STATUS_CONDITION_FALSE/WaitingForBackends" {
		t.Errorf("reconcile 2: RoutingReady: got %s", got)
	}
	observed["backend-c"] = providerSyncs(t, observed["backend-c"])

	// Reconcile 3: both exist, c joins.
	rsp = run(t, newRequest(t, xr, observed, req))
	if diff := cmp.Diff([]string{"qwen-b:0:1", "qwen-c:0:1", "qwen-a:1:1"}, backendRefs(t, rsp)); diff != "" {
		t.Errorf("reconcile 3: backendRefs: -want, +got:\n%s", diff)
	}
	// The route the provider applies now names c; c stays in it from
	// then on, even if its Object falters.
	observed["route"] = providerSyncs(t, applyDesired(t, observed["route"], rsp, "route"))
	observed["backend-c"] = object("backend-c", plainManifest("Backend"), false, false)
	rsp = run(t, newRequest(t, xr, observed, req))
	if diff := cmp.Diff([]string{"qwen-b:0:1", "qwen-c:0:1", "qwen-a:1:1"}, backendRefs(t, rsp)); diff != "" {
		t.Errorf("reconcile 4: a routed backend never leaves for a provider hiccup: backendRefs: -want, +got:\n%s", diff)
	}
}

// judgedHTTPRoute is namedHTTPRoute at generation, its status judged by
// Envoy Gateway at judged.
func judgedHTTPRoute(generation, judged float64, refs ...string) obj {
	o := namedHTTPRoute(refs...)
	m := o["status"].(obj)["atProvider"].(obj)["manifest"].(obj)
	md, _ := m["metadata"].(obj)
	if md == nil {
		md = obj{}
		m["metadata"] = md
	}
	md["generation"] = generation
	for _, p := range m["status"].(obj)["parents"].([]any) {
		for _, c := range p.(obj)["conditions"].([]any) {
			c.(obj)["observedGeneration"] = judged
		}
	}
	return o
}

// TestRemovedBackendKeptWhileHTTPRouteNamesIt: a backend removed from the
// spec keeps its Backend while the HTTPRoute Envoy Gateway translates
// still names it, even after the AIGatewayRoute stopped naming it: AI
// Gateway regenerates the HTTPRoute only when it reconciles the route.
func TestRemovedBackendKeptWhileHTTPRouteNamesIt(t *testing.T) {
	xr := routeXR(backend("a", 0, 1, "key-a"))
	req := map[string][]obj{"gateway": gwReady, "secret-key-a": keyA}
	b := []string{"aibackend-b", "backend-b"}
	cases := map[string]struct {
		reason    string
		httpRoute obj
		wantB     bool
	}{
		"HTTPRouteStillNamesB": {
			reason:    "AI Gateway has not regenerated the HTTPRoute yet: b's Backend must stay.",
			httpRoute: namedHTTPRoute("qwen-a", "qwen-b"),
			wantB:     true,
		},
		"HTTPRouteFollowed": {
			reason:    "The HTTPRoute no longer names b: its objects go.",
			httpRoute: namedHTTPRoute("qwen-a"),
		},
		"HTTPRouteUnknown": {
			reason: "The HTTPRoute's Object's last look failed (the HTTPRoute was being regenerated; without provider watches the Object looks again only at its poll): what Envoy Gateway translates is unknown and may still name b, so b's objects stay. The model found the window (test/sim, invariant 8).",
			httpRoute: func() obj {
				o := namedHTTPRoute("qwen-a")
				return object("httproute", o["status"].(obj)["atProvider"].(obj)["manifest"].(obj), false, true)
			}(),
			wantB: true,
		},
		"HTTPRouteNotJudgedYet": {
			reason:    "The HTTPRoute no longer names b, at generation 3, but Envoy Gateway has judged only generation 2, which named b, and may still translate it: b's objects stay.",
			httpRoute: judgedHTTPRoute(3, 2, "qwen-a"),
			wantB:     true,
		},
		"HTTPRouteJudged": {
			reason:    "Envoy Gateway has judged generation 3, which no longer names b: b's objects go.",
			httpRoute: judgedHTTPRoute(3, 3, "qwen-a"),
		},
		"HTTPRouteObjectNotCreatedYet": {
			reason: "No HTTPRoute Object observed: it has not been created yet, so no HTTPRoute generated from this route can name b: b's objects go.",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := observedRoute(true)
			o["route"] = routedObject(true, "qwen-a")
			o["httproute"] = tc.httpRoute
			if tc.httpRoute == nil {
				delete(o, "httproute")
			}
			rsp := run(t, newRequest(t, xr, o, req))
			var got []string
			for _, n := range b {
				if rsp.GetDesired().GetResources()[n] != nil {
					got = append(got, n)
				}
			}
			var want []string
			if tc.wantB {
				want = b
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nb's desired objects: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff([]string{"qwen-a:0:1"}, backendRefs(t, rsp)); diff != "" {
				t.Errorf("%s\nbackendRefs: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
