package fn

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestModelNamesBelongToNamespaces covers the rule of docs/reference.md's
// model names: a ModelRoute may serve only a name in its own namespace's
// space, or one that starts with no namespace where its gateway grants
// that to its namespace. A refused name composes no AIGatewayRoute, drops
// one composed before, and keeps everything else as observed.
func TestModelNamesBelongToNamespaces(t *testing.T) {
	withGrant := func(grant ...any) []obj {
		g := inferenceGateway(true, "Serving", false)
		if grant != nil {
			g["spec"].(obj)["modelNames"] = obj{"unprefixedNamespaces": grant}
		}
		return []obj{g}
	}
	cases := map[string]struct {
		reason   string
		model    string
		gateway  []obj
		observed map[string]obj
		// refused: RoutingReady False, ModelNameRefused, with wantMsg.
		refused bool
		wantMsg string
	}{
		"Default": {
			reason: "No spec.model: <namespace>/<name>, always the route's own.", gateway: withGrant(),
		},
		"OwnNamespace": {
			reason: "A name in the route's own namespace's space.", model: "ml-team/qwen3-8b-instruct", gateway: withGrant(),
		},
		"OtherNamespace": {
			reason: "A name in another namespace's space: refused, whatever the gateway grants.", model: "other-team/qwen", gateway: withGrant("*"),
			refused: true, wantMsg: `spec.model "other-team/qwen" is in the namespace other-team's space of model names (other-team/...), and a ModelRoute in ml-team may serve only names that start with ml-team/`,
		},
		"OtherNamespaceWithoutGateway": {
			reason: "Another namespace's name is judged before the gateway is read.", model: "other-team/qwen",
			refused: true, wantMsg: `spec.model "other-team/qwen" is in the namespace other-team's space`,
		},
		"OtherNamespaceServedBefore": {
			reason: "A route that served another namespace's name before stops serving it: its AIGatewayRoute goes, the rest is kept as observed.", model: "other-team/qwen", gateway: withGrant(),
			observed: observedRoute(true), refused: true, wantMsg: `spec.model "other-team/qwen" is in the namespace other-team's space`,
		},
		"UnprefixedNotGranted": {
			reason: "A name that starts with no namespace, on a gateway that grants none.", model: "gpt-4o", gateway: withGrant(),
			refused: true, wantMsg: `spec.model "gpt-4o" starts with no namespace, and the InferenceGateway "inference-gateway" does not let ModelRoutes in ml-team serve such names; name the model ml-team/<model>, or have the gateway's owner add ml-team to its spec.modelNames.unprefixedNamespaces`,
		},
		"UnprefixedGrantedToOthers": {
			reason: "The gateway grants other namespaces only.", model: "gpt-4o", gateway: withGrant("ml-platform"),
			refused: true, wantMsg: `spec.model "gpt-4o" starts with no namespace`,
		},
		"UnprefixedGranted": {
			reason: "The gateway grants the route's namespace.", model: "gpt-4o", gateway: withGrant("ml-platform", "ml-team"),
		},
		"UnprefixedGrantedToAll": {
			reason: "The gateway grants every namespace.", model: "gpt-4o", gateway: withGrant("*"),
		},
		"HuggingFaceName": {
			reason: "Qwen/Qwen3-8B starts with no namespace (Qwen is not a DNS label).", model: "Qwen/Qwen3-8B", gateway: withGrant(),
			refused: true, wantMsg: `spec.model "Qwen/Qwen3-8B" starts with no namespace`,
		},
		"HuggingFaceNameGranted": {
			reason: "... and is served where granted.", model: "Qwen/Qwen3-8B", gateway: withGrant("ml-team"),
		},
		"UnprefixedWithoutGateway": {
			reason: "Without the gateway a name without a namespace is not judged yet: the route waits for its gateway.", model: "gpt-4o",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			xr := routeXR(backend("a", 0, 1, ""))
			if tc.model != "" {
				xr["spec"].(obj)["model"] = tc.model
			}
			var req map[string][]obj
			if tc.gateway != nil {
				req = map[string][]obj{"gateway": tc.gateway}
			}
			rsp := run(t, newRequest(t, xr, tc.observed, req))
			c := condition(rsp, "RoutingReady")
			desired := rsp.GetDesired().GetResources()
			if !tc.refused {
				if c.GetReason() == "ModelNameRefused" {
					t.Fatalf("%s\nRoutingReady is ModelNameRefused: %s", tc.reason, c.GetMessage())
				}
				if tc.gateway != nil && desired["route"] == nil && desired["backend-a"] == nil {
					t.Errorf("%s\nnothing composed for an allowed name: %v", tc.reason, slices.Sorted(maps.Keys(desired)))
				}
				return
			}
			if c.GetReason() != "ModelNameRefused" || c.GetStatus().String() != "STATUS_CONDITION_FALSE" || !strings.Contains(c.GetMessage(), tc.wantMsg) {
				t.Errorf("%s\nRoutingReady is %s %s: %q, want False ModelNameRefused containing %q", tc.reason, c.GetStatus(), c.GetReason(), c.GetMessage(), tc.wantMsg)
			}
			if _, ok := desired["route"]; ok {
				t.Errorf("%s\nthe AIGatewayRoute is desired for a refused name", tc.reason)
			}
			var want []string
			for n := range tc.observed {
				if n != "route" {
					want = append(want, n)
				}
			}
			slices.Sort(want)
			if diff := cmp.Diff(want, slices.Sorted(maps.Keys(desired))); diff != "" {
				t.Errorf("%s\ndesired resources: -want (observed but the route), +got:\n%s", tc.reason, diff)
			}
			for n, o := range tc.observed {
				if d := desired[n]; d != nil {
					if diff := cmp.Diff(o["spec"], d.GetResource().AsMap()["spec"]); diff != "" {
						t.Errorf("%s\n%s is not carried forward as observed: -observed, +desired:\n%s", tc.reason, n, diff)
					}
				}
			}
			if st := status(rsp); st["model"] != tc.model {
				t.Errorf("%s\nstatus.model = %v, want %s", tc.reason, st["model"], tc.model)
			}
		})
	}
}
