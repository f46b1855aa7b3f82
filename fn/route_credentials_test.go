package fn

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// routedObject is an observed route Object whose spec lists backendRefs.
func routedObject(accepted bool, refs ...string) obj {
	o := object("route", acceptedManifest("AIGatewayRoute", "qwen", accepted), true, accepted)
	brs := make([]any, len(refs))
	for i, r := range refs {
		brs[i] = obj{"name": r}
	}
	o["spec"].(obj)["forProvider"] = obj{"manifest": obj{"apiVersion": "aigateway.envoyproxy.io/v1beta1", "kind": "AIGatewayRoute", "spec": obj{"rules": []any{obj{"backendRefs": brs}}}}}
	return o
}

// created is an Object the provider has finalized, with the managed
// reconciler's create annotation.
func created(o obj, annotation string) obj {
	md := o["metadata"].(obj)
	md["finalizers"] = []any{"finalizer.managedresource.crossplane.io"}
	md["annotations"].(obj)[annotation] = "2026-12-01T12:00:00Z"
	return o
}

func TestModelRouteCredentials(t *testing.T) {
	ab := []obj{backend("a", 1, 1, "key-a"), backend("b", 0, 1, "")}
	req := map[string][]obj{"gateway": gwReady, "secret-key-a": keyA}
	// withObserved returns observedRoute(true) with some Objects replaced.
	withObserved := func(set map[string]obj) map[string]obj {
		o := observedRoute(true)
		o["route"] = routedObject(true, "qwen-b")
		for k, v := range set {
			if v == nil {
				delete(o, k)
				continue
			}
			o[k] = v
		}
		return o
	}
	stale := withReferences(object("credential-a", plainManifest("Secret"), true, true))
	stale["metadata"].(obj)["generation"] = 2 // Crossplane added the reference; the provider has not synced it yet
	notSynced := withReferences(object("credential-a", plainManifest("Secret"), false, false))

	type want struct {
		condition string
		message   string
		refs      []string
		// withKey: the desired credential Object carries the reference.
		withKey bool
	}
	cases := map[string]struct {
		reason   string
		observed map[string]obj
		want     want
	}{
		"FirstReconcile": {
			reason:   "The credential Object does not exist: compose it without the key, so the provider's first Update cannot store the key in its spec; a waits, b serves.",
			observed: withObserved(map[string]obj{"credential-a": nil}),
			want:     want{condition: "RoutingReady=STATUS_CONDITION_FALSE/WaitingForCredentials", message: "the API keys of backends a have not reached the gateway cluster yet", refs: []string{"qwen-b:0:1"}},
		},
		"CreatedNotFinalized": {
			reason:   "The Object exists but the provider has not finalized it yet: still no reference.",
			observed: withObserved(map[string]obj{"credential-a": object("credential-a", nil, false, false)}),
			want:     want{condition: "RoutingReady=STATUS_CONDITION_FALSE/WaitingForCredentials", refs: []string{"qwen-b:0:1"}},
		},
		"CreatedAndFinalized": {
			reason:   "The empty Secret exists and the Object has its finalizer: add the reference; a joins once it is synced.",
			observed: withObserved(map[string]obj{"credential-a": object("credential-a", plainManifest("Secret"), true, true)}),
			want:     want{condition: "RoutingReady=STATUS_CONDITION_FALSE/WaitingForCredentials", refs: []string{"qwen-b:0:1"}, withKey: true},
		},
		"CreatedNotObservedYet": {
			reason:   "The provider created the empty Secret and recorded it (external-create-succeeded) but has not read it back yet: its full Updates are behind it, so add the reference now.",
			observed: withObserved(map[string]obj{"credential-a": created(object("credential-a", nil, true, false), "crossplane.io/external-create-succeeded")}),
			want:     want{condition: "RoutingReady=STATUS_CONDITION_FALSE/WaitingForCredentials", refs: []string{"qwen-b:0:1"}, withKey: true},
		},
		"CreatePending": {
			reason:   "The provider is about to create the Secret (external-create-pending only): its next Update writes the whole Object, so no reference yet.",
			observed: withObserved(map[string]obj{"credential-a": created(object("credential-a", nil, true, false), "crossplane.io/external-create-pending")}),
			want:     want{condition: "RoutingReady=STATUS_CONDITION_FALSE/WaitingForCredentials", refs: []string{"qwen-b:0:1"}},
		},
		"ReferenceNotSyncedYet": {
			reason:   "Synced=True is for the generation before the reference: the key has not been copied yet.",
			observed: withObserved(map[string]obj{"credential-a": stale}),
			want:     want{condition: "RoutingReady=STATUS_CONDITION_FALSE/WaitingForCredentials", refs: []string{"qwen-b:0:1"}, withKey: true},
		},
		"Delivered": {
			reason:   "The provider synced the reference: a joins the route in its tier.",
			observed: withObserved(nil),
			want:     want{condition: "RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted", refs: []string{"qwen-b:0:1", "qwen-a:1:1"}, withKey: true},
		},
		"AlreadyRoutedNotSynced": {
			reason:   "a is in the route and its Object fails to sync for a while: a stays, nothing flaps.",
			observed: withObserved(map[string]obj{"credential-a": notSynced, "route": routedObject(true, "qwen-b", "qwen-a")}),
			want:     want{condition: "RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted", refs: []string{"qwen-b:0:1", "qwen-a:1:1"}, withKey: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, newRequest(t, routeXR(ab...), tc.observed, req))
			c := summarize(rsp).Conditions[0]
			if c != tc.want.condition {
				t.Errorf("%s\nRoutingReady: want %s, got %s", tc.reason, tc.want.condition, c)
			}
			if msg := condition(rsp, "RoutingReady").GetMessage(); !strings.Contains(msg, tc.want.message) {
				t.Errorf("%s\nRoutingReady message %q does not contain %q", tc.reason, msg, tc.want.message)
			}
			if diff := cmp.Diff(tc.want.refs, backendRefs(t, rsp)); diff != "" {
				t.Errorf("%s\nbackendRefs: -want, +got:\n%s", tc.reason, diff)
			}
			cred := rsp.GetDesired().GetResources()["credential-a"].GetResource().AsMap()
			want := obj{"apiVersion": "v1", "kind": "Secret", "metadata": obj{"name": "qwen-a", "namespace": teamNS}, "type": "Opaque"}
			if diff := cmp.Diff(want, cred["spec"].(obj)["forProvider"].(obj)["manifest"]); diff != "" {
				t.Errorf("%s\nthe credential manifest never carries data: -want, +got:\n%s", tc.reason, diff)
			}
			var wantRefs any
			if tc.want.withKey {
				wantRefs = []any{obj{
					"patchesFrom": obj{"apiVersion": "v1", "kind": "Secret", "name": "key-a", "namespace": "ml-team", "fieldPath": "data[api-key]"},
					"toFieldPath": "data.apiKey",
				}}
			}
			if diff := cmp.Diff(wantRefs, cred["spec"].(obj)["references"], cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\ncredential references: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestModelRouteHTTPRoute(t *testing.T) {
	ab := []obj{backend("a", 1, 1, "key-a"), backend("b", 0, 1, "")}
	req := map[string][]obj{"gateway": gwReady, "secret-key-a": keyA}
	cases := map[string]struct {
		reason  string
		route   obj
		want    string
		message string
	}{
		"NotObserved": {
			reason:  "AI Gateway has not generated the HTTPRoute yet.",
			route:   nil,
			want:    "RoutingReady=STATUS_CONDITION_FALSE/HTTPRouteNotAccepted",
			message: "has not been observed",
		},
		"NoParentStatus": {
			reason:  "Envoy Gateway has not reported on it for our Gateway.",
			route:   object("httproute", obj{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "status": obj{}}, true, true),
			want:    "RoutingReady=STATUS_CONDITION_FALSE/HTTPRouteNotAccepted",
			message: "has not reported on the HTTPRoute",
		},
		"Rejected": {
			reason:  "Envoy Gateway rejected it: nothing is served, whatever AI Gateway says.",
			route:   object("httproute", httpRouteManifest(false, true), true, true),
			want:    "RoutingReady=STATUS_CONDITION_FALSE/HTTPRouteNotAccepted",
			message: "Accepted=False",
		},
		"Unresolved": {
			reason:  "Accepted, but a Backend does not resolve.",
			route:   object("httproute", httpRouteManifest(true, false), true, true),
			want:    "RoutingReady=STATUS_CONDITION_FALSE/HTTPRouteNotAccepted",
			message: "ResolvedRefs=False",
		},
		"Gone": {
			reason:  "The HTTPRoute was there and is gone: a stale manifest is not evidence.",
			route:   object("httproute", httpRouteManifest(true, true), false, true),
			want:    "RoutingReady=STATUS_CONDITION_FALSE/HTTPRouteNotAccepted",
			message: "has not been observed",
		},
		"Served": {
			reason: "Accepted and resolved for our Gateway.",
			route:  object("httproute", httpRouteManifest(true, true), true, true),
			want:   "RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := observedRoute(true)
			delete(o, "httproute")
			if tc.route != nil {
				o["httproute"] = tc.route
			}
			rsp := run(t, newRequest(t, routeXR(ab...), o, req))
			if got := summarize(rsp).Conditions[0]; got != tc.want {
				t.Errorf("%s\nwant %s, got %s", tc.reason, tc.want, got)
			}
			if msg := condition(rsp, "RoutingReady").GetMessage(); !strings.Contains(msg, tc.message) {
				t.Errorf("%s\nmessage %q does not contain %q", tc.reason, msg, tc.message)
			}
			hr := rsp.GetDesired().GetResources()["httproute"]
			want := obj{
				"managementPolicies": []any{"Observe"}, "watch": true,
				"forProvider":       obj{"manifest": obj{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": obj{"name": "qwen", "namespace": teamNS}}},
				"providerConfigRef": obj{"kind": "ClusterProviderConfig", "name": "gpu-cluster-1"},
			}
			if diff := cmp.Diff(want, hr.GetResource().AsMap()["spec"]); diff != "" {
				t.Errorf("%s\nhttproute Object spec: -want, +got:\n%s", tc.reason, diff)
			}
			if (hr.GetReady() == fnv1.Ready_READY_TRUE) != strings.Contains(tc.want, "TRUE") {
				t.Errorf("%s\nhttproute ready is %v", tc.reason, hr.GetReady())
			}
		})
	}
}

// TestRemovedBackendKeptWhileRouted: a backend removed from the spec keeps
// its objects while the observed route still names it, so a swap of a
// model's only keyed backend never leaves the serving route pointing at
// deleted objects (found by the model in test/sim).
func TestRemovedBackendKeptWhileRouted(t *testing.T) {
	old := []string{"backend-hosted", "aibackend-hosted", "credential-hosted", "credpolicy-hosted"}
	observed := func(routed ...string) map[string]obj {
		o := map[string]obj{
			"namespace": object("namespace", plainManifest("Namespace"), true, true),
			"route":     routedObject(true, routed...),
			"httproute": object("httproute", httpRouteManifest(true, true), true, true),
		}
		for _, n := range old {
			o[n] = object(n, plainManifest("X"), true, true)
		}
		return o
	}
	req := map[string][]obj{"gateway": gwReady, "secret-key-a": keyA}
	xr := routeXR(backend("hosted2", 0, 1, "key-a")) // hosted2's key is not delivered yet

	rsp := run(t, newRequest(t, xr, observed("qwen-hosted"), req))
	for _, n := range old {
		if rsp.GetDesired().GetResources()[n] == nil {
			t.Errorf("%s was deleted while the carried-forward route still names qwen-hosted", n)
		}
	}
	if got := summarize(rsp).Conditions[0]; got != "RoutingReady=STATUS_CONDITION_FALSE/WaitingForCredentials" {
		t.Errorf("RoutingReady: got %s", got)
	}

	rsp = run(t, newRequest(t, xr, observed("qwen-hosted2"), req))
	for _, n := range old {
		if rsp.GetDesired().GetResources()[n] != nil {
			t.Errorf("%s is still desired after the route stopped naming it", n)
		}
	}
}

// TestKeyRotationReapplies: a new version of the control-plane Secret
// changes the credential Object's spec, so provider-kubernetes applies it
// again and copies the new key, without the value passing through.
func TestKeyRotationReapplies(t *testing.T) {
	version := func(rv string) string {
		s := secret("key-a", obj{"api-key": apiKeyValue})
		s["metadata"].(obj)["resourceVersion"] = rv
		rsp := run(t, newRequest(t, routeXR(backend("a", 0, 1, "key-a")), observedRoute(true), map[string][]obj{"gateway": gwReady, "secret-key-a": {s}}))
		m := manifest(rsp, "credential-a")
		a, _ := m["metadata"].(obj)["annotations"].(obj)
		v, _ := a["modelplane.ai/api-key-version"].(string)
		return v
	}
	if got := version("41"); got != "41" {
		t.Errorf("credential annotation = %q, want the Secret's resourceVersion 41", got)
	}
	if got := version("42"); got != "42" {
		t.Errorf("after rotation the credential annotation = %q, want 42", got)
	}
}
