package fn

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/testing/protocmp"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
)

const (
	apiKeyValue   = "c2stc2VjcmV0LXZhbHVlLTEyMzQ=" // base64 of sk-secret-value-1234
	apiKeyDecoded = "sk-secret-value-1234"
)

var teamNS = names.TeamNamespace("ml-team")

func backend(name string, priority, weight int, key string) obj {
	b := obj{"name": name, "endpoint": obj{"hostname": name + ".example.com"}, "schema": obj{"name": "OpenAI"}, "priority": priority, "weight": weight}
	if key != "" {
		b["apiKey"] = obj{"secretRef": obj{"name": key, "key": "api-key"}}
	}
	return b
}

func routeXR(backends ...obj) obj {
	bs := make([]any, len(backends))
	for i, b := range backends {
		bs[i] = b
	}
	return obj{"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelRoute", "metadata": obj{"name": "qwen", "namespace": "ml-team"},
		"spec": obj{"gatewayName": "inference-gateway", "backends": bs}}
}

func inferenceGateway(ready bool, reason string, tls bool) obj {
	s := "False"
	if ready {
		s = "True"
	}
	spec := obj{"providerConfigName": "gpu-cluster-1"}
	if tls {
		spec = tlsSpec
	}
	return obj{"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceGateway", "metadata": obj{"name": "inference-gateway"}, "spec": spec,
		"status": obj{"address": "203.0.113.10", "conditions": []any{obj{"type": "GatewayReady", "status": s, "reason": reason, "message": "the gateway says " + reason}}}}
}

func secret(name string, data obj) obj {
	return obj{"apiVersion": "v1", "kind": "Secret", "metadata": obj{"name": name, "namespace": "ml-team"}, "data": data}
}

var (
	gwReady   = []obj{inferenceGateway(true, "Serving", false)}
	gwRolling = []obj{inferenceGateway(false, "OldReplicasPresent", false)}
	keyA      = []obj{secret("key-a", obj{"api-key": apiKeyValue})}
)

// observedRoute has every Object of routeXR(a: keyed, b: plain) observed.
func observedRoute(accepted bool) map[string]obj {
	o := map[string]obj{
		"namespace":    object("namespace", plainManifest("Namespace"), true, true),
		"route":        object("route", acceptedManifest("AIGatewayRoute", "qwen", accepted), true, accepted),
		"backend-a":    object("backend-a", plainManifest("Backend"), true, true),
		"aibackend-a":  object("aibackend-a", plainManifest("AIServiceBackend"), true, true),
		"credential-a": withReferences(object("credential-a", plainManifest("Secret"), true, true)),
		"httproute":    object("httproute", httpRouteManifest(accepted, accepted), true, true),
		"credpolicy-a": object("credpolicy-a", plainManifest("BackendSecurityPolicy"), true, true),
		"backend-b":    object("backend-b", plainManifest("Backend"), true, true),
		"aibackend-b":  object("aibackend-b", plainManifest("AIServiceBackend"), true, true),
		// Live, but without data: as if the gateway had not published its
		// status yet, so the verdict comes from the InferenceGateway.
		"gateway-status": object("gateway-status", plainManifest("ConfigMap"), true, true),
		"sources":        object("sources", plainManifest("ConfigMap"), true, true),
	}
	return o
}

var allRoute = []string{"aibackend-a", "aibackend-b", "backend-a", "backend-b", "credential-a", "credpolicy-a", "gateway-status", "httproute", "namespace", "route", "sources"}

// placed is the observed Backend and AIServiceBackend Objects of the named
// backends, live and Ready on the gateway cluster: what a backend needs
// before it joins the route.
func placed(backends ...string) map[string]obj {
	out := map[string]obj{}
	for _, b := range backends {
		out["backend-"+b] = object("backend-"+b, plainManifest("Backend"), true, true)
		out["aibackend-"+b] = object("aibackend-"+b, plainManifest("AIServiceBackend"), true, true)
	}
	return out
}

// withRoute adds an observed AIGatewayRoute Object, serving local, to
// observed: a route that exists is composed while keyed backends are still
// on their way.
func withRoute(observed map[string]obj) map[string]obj {
	observed["route"] = routedObject(true, "qwen-local")
	return observed
}

func routeReadiness(names []string, ready ...string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		out[n] = fnv1.Ready_READY_FALSE.String()
	}
	for _, n := range ready {
		out[n] = fnv1.Ready_READY_TRUE.String()
	}
	return out
}

func without(all []string, drop ...string) []string {
	var out []string
	for _, n := range all {
		keep := true
		for _, d := range drop {
			keep = keep && n != d
		}
		if keep {
			out = append(out, n)
		}
	}
	return out
}

func TestRunFunctionModelRoute(t *testing.T) {
	ab := []obj{backend("a", 1, 1, "key-a"), backend("b", 0, 1, "")}
	type want struct {
		summary summary
		message []string
		// refs is the route's backendRefs as "name:priority:weight".
		refs []string
	}
	cases := map[string]struct {
		reason string
		req    *fnv1.RunFunctionRequest
		want   want
	}{
		"GatewayNotFetchedYet": {
			reason: "First call: nothing resolved, nothing observed. Nothing can be built; ask for the gateway and the Secret.",
			req:    newRequest(t, routeXR(ab...), nil, nil),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_FALSE/WaitingForGateway"},
				Resources:  map[string]string{},
				XRReady:    "READY_FALSE",
			}, message: []string{"has not been fetched yet"}},
		},
		"GatewayMissingCarriesForward": {
			reason: "The gateway is gone: nothing can be built, so everything observed is carried forward.",
			req:    newRequest(t, routeXR(ab...), observedRoute(true), map[string][]obj{"gateway": nil, "secret-key-a": keyA}),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_FALSE/WaitingForGateway"},
				Resources:  routeReadiness(allRoute, allRoute...),
				XRReady:    "READY_FALSE",
			}, message: []string{"does not exist"}},
		},
		"GatewayNotReady": {
			reason: "The gateway rolls out: keep composing, RoutingReady False quoting the gateway's reason.",
			req:    newRequest(t, routeXR(ab...), observedRoute(true), map[string][]obj{"gateway": gwRolling, "secret-key-a": keyA}),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_FALSE/WaitingForGateway"},
				Resources:  routeReadiness(allRoute, allRoute...),
				XRReady:    "READY_FALSE",
			}, message: []string{"(OldReplicasPresent)", "the gateway says OldReplicasPresent"}, refs: []string{"qwen-b:0:1", "qwen-a:1:1"}},
		},
		"RouteNotReconciled": {
			reason: "The gateway is ready but AI Gateway has written no status on the route: its controller is down or behind, and the message says to look at it.",
			req:    newRequest(t, routeXR(ab...), observedRoute(false), map[string][]obj{"gateway": gwReady, "secret-key-a": keyA}),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_FALSE/WaitingForRoute"},
				Resources:  routeReadiness(allRoute, without(allRoute, "route", "httproute")...),
				XRReady:    "READY_FALSE",
			}, message: []string{"no status on the AIGatewayRoute", "AI Gateway's controller runs"}, refs: []string{"qwen-b:0:1", "qwen-a:1:1"}},
		},
		"RouteRefused": {
			reason: "AI Gateway refused the route: its message is quoted.",
			req: newRequest(t, routeXR(ab...), withObserved(observedRoute(false), "route", object("route", obj{
				"apiVersion": "aigateway.envoyproxy.io/v1beta1", "kind": "AIGatewayRoute", "metadata": obj{"name": "qwen"},
				"status": obj{"conditions": []any{cond("NotAccepted", false, "ReconciliationFailed", `AIServiceBackend "qwen-a" not found`)}},
			}, true, false)), map[string][]obj{"gateway": gwReady, "secret-key-a": keyA}),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_FALSE/WaitingForRoute"},
				Resources:  routeReadiness(allRoute, without(allRoute, "route", "httproute")...),
				XRReady:    "READY_FALSE",
			}, message: []string{`has not accepted the AIGatewayRoute yet: AIServiceBackend "qwen-a" not found`}, refs: []string{"qwen-b:0:1", "qwen-a:1:1"}},
		},
		"RouteUpdateRaceJustLost": {
			reason: "AI Gateway lost a race updating the HTTPRoute it generates a moment ago and retries; the HTTPRoute it generated before serves, so the route stays RoutingReady.",
			req: newRequest(t, routeXR(ab...), withObserved(observedRoute(true), "route", object("route", routeRace(time.Now().Add(-2*time.Second)), true, true)),
				map[string][]obj{"gateway": gwReady, "secret-key-a": keyA}),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted"},
				Resources:  routeReadiness(allRoute, allRoute...),
				XRReady:    "READY_UNSPECIFIED",
			}, refs: []string{"qwen-b:0:1", "qwen-a:1:1"}},
		},
		"RouteUpdateRaceLasting": {
			reason: "The same race, written a minute ago and not retried since: AI Gateway's message is quoted.",
			req: newRequest(t, routeXR(ab...), withObserved(observedRoute(true), "route", object("route", routeRace(time.Now().Add(-time.Minute)), true, true)),
				map[string][]obj{"gateway": gwReady, "secret-key-a": keyA}),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_FALSE/WaitingForRoute"},
				Resources:  routeReadiness(allRoute, without(allRoute, "route")...),
				XRReady:    "READY_FALSE",
			}, message: []string{"failed to update HTTPRoute: Operation cannot be fulfilled on"}, refs: []string{"qwen-b:0:1", "qwen-a:1:1"}},
		},
		"AllReady": {
			reason: "Gateway ready and route accepted.",
			req:    newRequest(t, routeXR(ab...), observedRoute(true), map[string][]obj{"gateway": gwReady, "secret-key-a": keyA}),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted"},
				Resources:  routeReadiness(allRoute, allRoute...),
				XRReady:    "READY_UNSPECIFIED",
			}, refs: []string{"qwen-b:0:1", "qwen-a:1:1"}},
		},
		"SecretMissing": {
			reason: "a's Secret is gone: a leaves the route, its composed Secret is carried forward, a Warning names it, and b still serves.",
			req:    newRequest(t, routeXR(ab...), observedRoute(true), map[string][]obj{"gateway": gwReady, "secret-key-a": nil}),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted"},
				Resources:  routeReadiness(allRoute, allRoute...),
				XRReady:    "READY_UNSPECIFIED",
				Results:    []string{`SEVERITY_WARNING: backend "a" is left out of the route: its API-key Secret "key-a" does not exist in the ModelRoute's namespace; create it with the key "api-key"`},
			}, refs: []string{"qwen-b:0:1"}},
		},
		"SecretKeyMissing": {
			reason: "The Secret exists without the key: the same as a missing Secret, and the message names the key.",
			req:    newRequest(t, routeXR(ab...), observedRoute(true), map[string][]obj{"gateway": gwReady, "secret-key-a": {secret("key-a", obj{"other": apiKeyValue})}}),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted"},
				Resources:  routeReadiness(allRoute, allRoute...),
				XRReady:    "READY_UNSPECIFIED",
				Results:    []string{`SEVERITY_WARNING: backend "a" is left out of the route: its API-key Secret "key-a" has no key "api-key"; add the key or fix spec.backends.apiKey.secretRef.key`},
			}, refs: []string{"qwen-b:0:1"}},
		},
		"AllUnusableRouteComposed": {
			reason: "Every backend lacks its key and the route exists: the route is carried forward unchanged, never replaced by an empty one.",
			req:    newRequest(t, routeXR(backend("a", 1, 1, "key-a")), observedRoute(true), map[string][]obj{"gateway": gwRolling, "secret-key-a": nil}),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_FALSE/WaitingForGateway"},
				Resources:  routeReadiness(without(allRoute, "aibackend-b", "backend-b"), without(allRoute, "aibackend-b", "backend-b")...),
				XRReady:    "READY_FALSE",
				Results:    []string{`SEVERITY_WARNING: backend "a" is left out of the route: its API-key Secret "key-a" does not exist in the ModelRoute's namespace; create it with the key "api-key"`},
			}, message: []string{"Also: none of the 1 backends can be used"}},
		},
		"AllUnusableGatewayReady": {
			reason: "With the gateway ready, NoUsableBackends is what the user must fix first.",
			req:    newRequest(t, routeXR(backend("a", 1, 1, "key-a")), observedRoute(true), map[string][]obj{"gateway": gwReady, "secret-key-a": nil}),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_FALSE/NoUsableBackends"},
				Resources:  routeReadiness(without(allRoute, "aibackend-b", "backend-b"), without(allRoute, "aibackend-b", "backend-b")...),
				XRReady:    "READY_FALSE",
				Results:    []string{`SEVERITY_WARNING: backend "a" is left out of the route: its API-key Secret "key-a" does not exist in the ModelRoute's namespace; create it with the key "api-key"`},
			}},
		},
		"BackendRemovedFromSpec": {
			reason: "Removing b from the spec is the one way its objects go.",
			req:    newRequest(t, routeXR(backend("a", 1, 1, "key-a")), observedRoute(true), map[string][]obj{"gateway": gwReady, "secret-key-a": keyA}),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted"},
				Resources:  routeReadiness(without(allRoute, "aibackend-b", "backend-b"), without(allRoute, "aibackend-b", "backend-b")...),
				XRReady:    "READY_UNSPECIFIED",
			}, refs: []string{"qwen-a:0:1"}},
		},
		"TiersRenumbered": {
			reason: "Priorities 0, 5 and 9 become 0, 1 and 2.",
			req:    newRequest(t, routeXR(backend("x", 9, 1, ""), backend("y", 5, 1, ""), backend("z", 0, 1, "")), placed("x", "y", "z"), map[string][]obj{"gateway": gwReady}),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_FALSE/WaitingForRoute"},
				Resources:  routeReadiness([]string{"namespace", "route", "httproute", "gateway-status", "backend-x", "aibackend-x", "backend-y", "aibackend-y", "backend-z", "aibackend-z"}, "gateway-status", "backend-x", "aibackend-x", "backend-y", "aibackend-y", "backend-z", "aibackend-z"),
				XRReady:    "READY_FALSE",
			}, refs: []string{"qwen-z:0:1", "qwen-y:1:1", "qwen-x:2:1"}},
		},
		"WeightMillionNextToOne": {
			reason: "1,000,000 next to 1 keeps its ratio; nothing rounds to 0.",
			req:    newRequest(t, routeXR(backend("x", 0, 1000000, ""), backend("y", 0, 1, "")), placed("x", "y"), map[string][]obj{"gateway": gwReady}),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_FALSE/WaitingForRoute"},
				Resources:  routeReadiness([]string{"namespace", "route", "httproute", "gateway-status", "backend-x", "aibackend-x", "backend-y", "aibackend-y"}, "gateway-status", "backend-x", "aibackend-x", "backend-y", "aibackend-y"),
				XRReady:    "READY_FALSE",
			}, refs: []string{"qwen-x:0:1000000", "qwen-y:0:1"}},
		},
		"WeightsReducedPerTier": {
			reason: "Weights are reduced by the GCD within each tier, not across tiers.",
			req:    newRequest(t, routeXR(backend("x", 0, 300, ""), backend("y", 0, 600, ""), backend("z", 1, 400, "")), placed("x", "y", "z"), map[string][]obj{"gateway": gwReady}),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_FALSE/WaitingForRoute"},
				Resources:  routeReadiness([]string{"namespace", "route", "httproute", "gateway-status", "backend-x", "aibackend-x", "backend-y", "aibackend-y", "backend-z", "aibackend-z"}, "gateway-status", "backend-x", "aibackend-x", "backend-y", "aibackend-y", "backend-z", "aibackend-z"),
				XRReady:    "READY_FALSE",
			}, refs: []string{"qwen-x:0:1", "qwen-y:0:2", "qwen-z:1:1"}},
		},
		"SingleBackend": {
			reason: "One backend: tier 0, weight 1 whatever it asked for.",
			req:    newRequest(t, routeXR(backend("x", 7, 40, "")), placed("x"), map[string][]obj{"gateway": gwReady}),
			want: want{summary: summary{
				Conditions: []string{"RoutingReady=STATUS_CONDITION_FALSE/WaitingForRoute"},
				Resources:  routeReadiness([]string{"namespace", "route", "httproute", "gateway-status", "backend-x", "aibackend-x"}, "gateway-status", "backend-x", "aibackend-x"),
				XRReady:    "READY_FALSE",
			}, refs: []string{"qwen-x:0:1"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, tc.req)
			if diff := cmp.Diff(tc.want.summary, summarize(rsp), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nRunFunction(...): -want, +got:\n%s", tc.reason, diff)
			}
			msg := condition(rsp, "RoutingReady").GetMessage()
			for _, m := range tc.want.message {
				if !strings.Contains(msg, m) {
					t.Errorf("%s\nRoutingReady message %q does not contain %q", tc.reason, msg, m)
				}
			}
			if tc.want.refs != nil {
				if diff := cmp.Diff(tc.want.refs, backendRefs(t, rsp)); diff != "" {
					t.Errorf("%s\nbackendRefs: -want, +got:\n%s", tc.reason, diff)
				}
			}
		})
	}
}

// backendRefs lists the desired route's backendRefs as name:priority:weight.
func backendRefs(t *testing.T, rsp *fnv1.RunFunctionResponse) []string {
	t.Helper()
	var r struct {
		Spec struct {
			Rules []struct {
				BackendRefs []struct {
					Name     string `json:"name"`
					Priority int    `json:"priority"`
					Weight   int    `json:"weight"`
				} `json:"backendRefs"`
			} `json:"rules"`
		} `json:"spec"`
	}
	b, _ := json.Marshal(manifest(rsp, "route"))
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rule := range r.Spec.Rules {
		for _, br := range rule.BackendRefs {
			out = append(out, fmt.Sprintf("%s:%d:%d", br.Name, br.Priority, br.Weight))
		}
	}
	return out
}

func TestModelRouteRequirements(t *testing.T) {
	xr := routeXR(backend("a", 0, 1, "key-a"), backend("b", 0, 1, "key-a"), backend("c", 0, 1, "key-c"))
	ns := "ml-team"
	want := &fnv1.Requirements{Resources: map[string]*fnv1.ResourceSelector{
		"gateway":      {ApiVersion: "modelplane.ai/v1alpha1", Kind: "InferenceGateway", Match: &fnv1.ResourceSelector_MatchName{MatchName: "inference-gateway"}},
		"secret-key-a": {ApiVersion: "v1", Kind: "Secret", Match: &fnv1.ResourceSelector_MatchName{MatchName: "key-a"}, Namespace: &ns},
		"secret-key-c": {ApiVersion: "v1", Kind: "Secret", Match: &fnv1.ResourceSelector_MatchName{MatchName: "key-c"}, Namespace: &ns},
	}}
	// The gateway is cluster-scoped: no namespace. Each Secret is asked for
	// by name in the ModelRoute's own namespace. crossplane render ignores
	// the namespace, so only this test proves it.
	for name, req := range map[string]*fnv1.RunFunctionRequest{
		"FirstCall":  newRequest(t, xr, nil, nil),
		"SecondCall": newRequest(t, xr, nil, map[string][]obj{"gateway": gwReady, "secret-key-a": keyA}),
	} {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, req)
			if diff := cmp.Diff(want, rsp.GetRequirements(), protocmp.Transform()); diff != "" {
				t.Errorf("requirements: -want, +got:\n%s", diff)
			}
		})
	}

	t.Run("InputNamesGatewayAPIVersion", func(t *testing.T) {
		req := newRequest(t, xr, nil, nil)
		req.Input = mustStruct(t, obj{"apiVersion": "inferencegateway.fn.crossplane.io/v1beta1", "kind": "Input", "inferenceGatewayAPIVersion": "platform.example.org/v1"})
		rsp := run(t, req)
		if got := rsp.GetRequirements().GetResources()["gateway"].GetApiVersion(); got != "platform.example.org/v1" {
			t.Errorf("gateway requirement apiVersion = %q, want the Input's platform.example.org/v1", got)
		}
	})
}

func TestModelRouteManifests(t *testing.T) {
	rsp := run(t, newRequest(t, routeXR(backend("a", 0, 1, "key-a"), obj{"name": "claude", "endpoint": obj{"hostname": "api.anthropic.com"}, "schema": obj{"name": "Anthropic"}, "apiKey": obj{"secretRef": obj{"name": "key-a", "key": "api-key"}}},
		obj{"name": "local", "endpoint": obj{"hostname": "vllm.ml-team.svc.cluster.local", "port": 8000, "tls": false}, "schema": obj{"name": "OpenAI"}},
		obj{"name": "azure", "endpoint": obj{"hostname": "team.openai.azure.com"}, "schema": obj{"name": "AzureOpenAI", "version": "2025-01-01-preview"}, "apiKey": obj{"secretRef": obj{"name": "key-a", "key": "api-key"}}},
		obj{"name": "cohere", "endpoint": obj{"hostname": "api.cohere.com"}, "schema": obj{"name": "Cohere"}, "apiKey": obj{"secretRef": obj{"name": "key-a", "key": "api-key"}}}),
		withRoute(placed("local")), map[string][]obj{"gateway": {inferenceGateway(true, "Serving", true)}, "secret-key-a": keyA}))

	route := manifest(rsp, "route")
	spec := route["spec"].(obj)
	if got := spec["parentRefs"]; !cmp.Equal(got, []any{obj{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference-gateway", "namespace": "modelplane-system", "sectionName": "https"}}) {
		t.Errorf("a TLS gateway's route must bind the https listener; parentRefs = %v", got)
	}
	rule := spec["rules"].([]any)[0].(obj)
	if diff := cmp.Diff(obj{"request": "600s"}, rule["timeouts"]); diff != "" {
		t.Errorf("timeouts: -want, +got:\n%s", diff)
	}
	if got := route["metadata"].(obj)["namespace"]; got != teamNS {
		t.Errorf("route namespace = %v, want the team namespace %s", got, teamNS)
	}

	cases := map[string]struct {
		resource string
		want     obj
	}{
		"BackendTLS":   {"backend-a", obj{"endpoints": []any{obj{"fqdn": obj{"hostname": "a.example.com", "port": 443.0}}}, "tls": obj{"wellKnownCACertificates": "System", "sni": "a.example.com"}}},
		"BackendPlain": {"backend-local", obj{"endpoints": []any{obj{"fqdn": obj{"hostname": "vllm.ml-team.svc.cluster.local", "port": 8000.0}}}}},
		"AIServiceBackend": {"aibackend-a", obj{"schema": obj{"name": "OpenAI", "prefix": "/v1"}, "backendRef": obj{"group": "gateway.envoyproxy.io", "kind": "Backend", "name": "qwen-a"},
			"headerMutation": obj{"remove": []any{"x-modelplane-caller"}}}},
		"APIKeyPolicy": {"credpolicy-a", obj{"type": "APIKey", "apiKey": obj{"secretRef": obj{"name": "qwen-a"}},
			"targetRefs": []any{obj{"group": "aigateway.envoyproxy.io", "kind": "AIServiceBackend", "name": "qwen-a"}}}},
		"AnthropicPolicy": {"credpolicy-claude", obj{"type": "AnthropicAPIKey", "anthropicAPIKey": obj{"secretRef": obj{"name": "qwen-claude"}},
			"targetRefs": []any{obj{"group": "aigateway.envoyproxy.io", "kind": "AIServiceBackend", "name": "qwen-claude"}}}},
		"AzurePolicy": {"credpolicy-azure", obj{"type": "AzureAPIKey", "azureAPIKey": obj{"secretRef": obj{"name": "qwen-azure"}},
			"targetRefs": []any{obj{"group": "aigateway.envoyproxy.io", "kind": "AIServiceBackend", "name": "qwen-azure"}}}},
		"CoherePolicy": {"credpolicy-cohere", obj{"type": "APIKey", "apiKey": obj{"secretRef": obj{"name": "qwen-cohere"}},
			"targetRefs": []any{obj{"group": "aigateway.envoyproxy.io", "kind": "AIServiceBackend", "name": "qwen-cohere"}}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, manifest(rsp, tc.resource)["spec"]); diff != "" {
				t.Errorf("%s spec: -want, +got:\n%s", tc.resource, diff)
			}
		})
	}

	if sec := manifest(rsp, "credential-a"); sec["data"] != nil {
		t.Errorf("the composed Secret must not carry the key; provider-kubernetes copies it; got data %v", sec["data"])
	}
	ns := rsp.GetDesired().GetResources()["namespace"].GetResource().AsMap()["spec"].(obj)
	if diff := cmp.Diff([]any{"Observe", "Create", "Update"}, ns["managementPolicies"]); diff != "" {
		t.Errorf("the team namespace must never be deleted: -want, +got:\n%s", diff)
	}
	if got := manifest(rsp, "namespace")["metadata"].(obj)["labels"]; !cmp.Equal(got, obj{names.TeamNamespaceLabel: "ml-team"}) {
		t.Errorf("team namespace labels = %v", got)
	}
}

// TestModelRouteFatal: a spec the function refuses is Fatal for a new
// ModelRoute, and for one that composed keeps everything as observed with
// RoutingReady False, SpecRefused (compose.Refuse).
func TestModelRouteFatal(t *testing.T) {
	many := make([]obj, 17)
	for i := range many {
		many[i] = backend(fmt.Sprintf("b%d", i), 0, 1, "")
	}
	ip := backend("x", 0, 1, "")
	ip["endpoint"] = obj{"hostname": "10.0.0.1"}
	cases := map[string]struct {
		xr   obj
		want string
	}{
		"DuplicateNames":  {routeXR(backend("a", 0, 1, ""), backend("a", 1, 1, "")), `spec.backends[1].name "a" is also the name of spec.backends[0]`},
		"TooMany":         {routeXR(many...), "spec.backends has 17 entries; at most 16 can be served, because AI Gateway puts every backend of a model into one HTTPRoute rule and Gateway API allows 16 backendRefs in a rule"},
		"KeyForBedrock":   {routeXR(obj{"name": "x", "endpoint": obj{"hostname": "bedrock-runtime.us-east-1.amazonaws.com"}, "schema": obj{"name": "AWSBedrock"}, "apiKey": obj{"secretRef": obj{"name": "k", "key": "k"}}}), "spec.backends[0].apiKey is set, but the AWSBedrock schema takes no API key"},
		"KeyForVertex":    {routeXR(obj{"name": "x", "endpoint": obj{"hostname": "us-central1-aiplatform.googleapis.com"}, "schema": obj{"name": "GCPVertexAI"}, "apiKey": obj{"secretRef": obj{"name": "k", "key": "k"}}}), "spec.backends[0].apiKey is set, but the GCPVertexAI schema takes no API key"},
		"BadHostname":     {routeXR(ip), `spec.backends[0].endpoint.hostname "10.0.0.1" is an IP address`},
		"IPNextToDNSName": {routeXR(backend("a", 0, 1, ""), ip), `spec.backends[1].endpoint.hostname "10.0.0.1" is an IP address; use the backend's DNS name (for a Service, <service>.<namespace>.svc.cluster.local): Envoy Gateway routes IP endpoints in a way on which AI Gateway cannot set priority tiers, so the model's traffic would be split across all its tiers instead of failing over`},
		"NotFQDN":         {routeXR(obj{"name": "x", "endpoint": obj{"hostname": "localhost"}, "schema": obj{"name": "OpenAI"}}), `spec.backends[0].endpoint.hostname "localhost" is not a fully qualified DNS name`},
		"WeightZero":      {routeXR(backend("x", 0, 0, "")), "spec.backends[0].weight is 0; use 1 to 1000000"},
		"WeightTooBig":    {routeXR(backend("x", 0, 1000001, "")), "spec.backends[0].weight is 1000001; use 1 to 1000000"},
		"PriorityTooBig":  {routeXR(backend("x", 64, 1, "")), "spec.backends[0].priority is 64; use 0 (preferred) to 63"},
		"NoBackends":      {routeXR(), "spec.backends is empty"},
		"UnknownSchema":   {routeXR(obj{"name": "x", "endpoint": obj{"hostname": "a.b.c"}, "schema": obj{"name": "Gemini"}}), `spec.backends[0].schema.name "Gemini" is not a schema AI Gateway knows`},
		"WeightWrongType": {routeXR(obj{"name": "x", "endpoint": obj{"hostname": "a.b.c"}, "schema": obj{"name": "OpenAI"}, "weight": "heavy"}), "spec.backends.weight is a JSON string, but must be a whole number"},
		"UnknownField":    {routeXR(obj{"name": "x", "endpoint": obj{"hostname": "a.b.c"}, "schema": obj{"name": "OpenAI"}, "wieght": 2}), "cannot read ModelRoute: spec.backends[0].wieght is not a field of ModelRoute"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// A new route: Fatal, nothing to keep.
			rsp := run(t, newRequest(t, tc.xr, nil, map[string][]obj{"gateway": gwReady, "secret-key-a": keyA}))
			rs := rsp.GetResults()
			if len(rs) != 1 || rs[0].GetSeverity() != fnv1.Severity_SEVERITY_FATAL || !strings.Contains(rs[0].GetMessage(), tc.want) {
				t.Fatalf("want one Fatal result containing %q, got %v", tc.want, rs)
			}
			if len(rsp.GetDesired().GetResources()) != 0 {
				t.Errorf("a Fatal response must pass the desired state through untouched; got %d resources", len(rsp.GetDesired().GetResources()))
			}
			// A route that composed: it keeps serving, and says why not.
			req := newRequest(t, tc.xr, observedRoute(true), map[string][]obj{"gateway": gwReady, "secret-key-a": keyA})
			expectRefused(t, req, run(t, req), "RoutingReady", tc.want)
		})
	}
}

// TestSecretValueNeverLeaks checks the API key appears only in the composed
// Secret: not in status, conditions, results or errors.
func TestSecretValueNeverLeaks(t *testing.T) {
	reqs := map[string]*fnv1.RunFunctionRequest{
		"Ready":       newRequest(t, routeXR(backend("a", 0, 1, "key-a")), observedRoute(true), map[string][]obj{"gateway": gwReady, "secret-key-a": keyA}),
		"FirstCall":   newRequest(t, routeXR(backend("a", 0, 1, "key-a")), nil, map[string][]obj{"gateway": gwReady, "secret-key-a": keyA}),
		"KeyMissing":  newRequest(t, routeXR(backend("a", 0, 1, "key-a")), observedRoute(true), map[string][]obj{"gateway": gwReady, "secret-key-a": {secret("key-a", obj{"other": apiKeyValue})}}),
		"Fatal":       newRequest(t, routeXR(backend("a", 0, 1, "key-a"), backend("a", 0, 1, "key-a")), nil, map[string][]obj{"gateway": gwReady, "secret-key-a": keyA}),
		"GatewayGone": newRequest(t, routeXR(backend("a", 0, 1, "key-a")), nil, map[string][]obj{"gateway": nil, "secret-key-a": keyA}),
	}
	for name, req := range reqs {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, req)
			// No desired resource carries the key: provider-kubernetes
			// copies it from the control plane (credential-a included).
			for n, r := range rsp.GetDesired().GetResources() {
				b, _ := r.GetResource().MarshalJSON()
				if strings.Contains(string(b), apiKeyValue) || strings.Contains(string(b), apiKeyDecoded) {
					t.Errorf("composed resource %q carries the API key", n)
				}
			}
			leaks := []string{}
			xr, _ := rsp.GetDesired().GetComposite().GetResource().MarshalJSON()
			leaks = append(leaks, string(xr))
			for _, c := range rsp.GetConditions() {
				leaks = append(leaks, c.GetMessage(), c.GetReason())
			}
			for _, r := range rsp.GetResults() {
				leaks = append(leaks, r.GetMessage(), r.GetReason())
			}
			for _, s := range leaks {
				if strings.Contains(s, apiKeyValue) || strings.Contains(s, apiKeyDecoded) {
					t.Errorf("the API key leaked into %q", s)
				}
			}
		})
	}
}

// TestModelsListing applies AI Gateway's /v1/models rule to every
// AIGatewayRoute the function composes: a header match whose type is Exact
// or unset and whose name is exactly x-ai-eg-model names a model (ai-gateway
// v1.0.0 internal/controller/gateway.go). The anchor must never be listed;
// a ModelRoute's route lists exactly its model.
func TestModelsListing(t *testing.T) {
	cases := map[string]struct {
		req  *fnv1.RunFunctionRequest
		want []string
	}{
		"GatewayDefaults": {newRequest(t, gatewayXR(nil), nil, nil), nil},
		"GatewayCustomAnchor": {func() *fnv1.RunFunctionRequest {
			r := newRequest(t, gatewayXR(tlsSpec), nil, nil)
			r.Input = mustStruct(t, obj{"apiVersion": "inferencegateway.fn.crossplane.io/v1beta1", "kind": "Input", "anchorHeader": obj{"name": "x-anchor", "value": "1"}})
			return r
		}(), nil},
		"GatewayFrontDoorAndEnvoySettings": {newRequest(t, gatewayXR(obj{
			"providerConfigName": "gpu-cluster-1", "hostname": "llm.example.com", "tls": obj{"certificateRefs": []any{obj{"name": "llm-tls"}}},
			"envoy": obj{"drainTimeout": "900s"},
		}), nil, map[string][]obj{"tls-secret-llm-tls": {tlsSecret(true, true)}}), nil},
		"ModelRouteDefaultModel": {newRequest(t, routeXR(backend("a", 0, 1, "")), placed("a"), map[string][]obj{"gateway": gwReady}), []string{"ml-team/qwen"}},
		"ModelRouteNamedModel": {func() *fnv1.RunFunctionRequest {
			xr := routeXR(backend("a", 0, 1, ""), backend("b", 3, 1, ""))
			xr["spec"].(obj)["model"] = "qwen3-8b"
			// A name that starts with no namespace: the gateway grants it.
			gw := inferenceGateway(true, "Serving", false)
			gw["spec"].(obj)["modelNames"] = obj{"unprefixedNamespaces": []any{"ml-team"}}
			return newRequest(t, xr, placed("a", "b"), map[string][]obj{"gateway": {gw}})
		}(), []string{"qwen3-8b"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, tc.req)
			var got []string
			routes := 0
			for n := range rsp.GetDesired().GetResources() {
				m := manifest(rsp, n)
				if m["kind"] != "AIGatewayRoute" {
					continue
				}
				routes++
				got = append(got, listedModels(m)...)
			}
			if routes == 0 {
				t.Fatal("no AIGatewayRoute composed")
			}
			sort.Strings(got)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("/v1/models: -want, +got:\n%s", diff)
			}
		})
	}
}

func listedModels(route obj) []string {
	var out []string
	spec, _ := route["spec"].(obj)
	rules, _ := spec["rules"].([]any)
	for _, r := range rules {
		matches, _ := r.(obj)["matches"].([]any)
		for _, m := range matches {
			headers, _ := m.(obj)["headers"].([]any)
			for _, h := range headers {
				hm := h.(obj)
				typ, _ := hm["type"].(string)
				if (typ == "" || typ == "Exact") && hm["name"] == "x-ai-eg-model" {
					out = append(out, hm["value"].(string))
				}
			}
		}
	}
	return out
}

// withObserved returns observed with its resource name replaced by o.
func withObserved(observed map[string]obj, name string, o obj) map[string]obj {
	observed[name] = o
	return observed
}

// routeRace is the model's AIGatewayRoute as AI Gateway writes it when its
// update of the generated HTTPRoute lost an optimistic-concurrency race at
// the time at.
func routeRace(at time.Time) obj {
	c := cond("NotAccepted", false, "ReconciliationFailed", `failed to update HTTPRoute: Operation cannot be fulfilled on httproutes.gateway.networking.k8s.io "qwen": the object has been modified; please apply your changes to the latest version and try again`)
	c["lastTransitionTime"] = at.UTC().Format(time.RFC3339)
	return obj{"apiVersion": "aigateway.envoyproxy.io/v1beta1", "kind": "AIGatewayRoute", "metadata": obj{"name": "qwen"}, "status": obj{"conditions": []any{c}}}
}
