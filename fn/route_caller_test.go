package fn

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCallerIdentityReachesOnlyInClusterBackends checks which backends
// receive x-modelplane-caller: by default only one inside the gateway
// cluster (no API key, a Service hostname), and each backend can say
// otherwise. A backend that must not see it gets an AIServiceBackend
// headerMutation that removes it.
func TestCallerIdentityReachesOnlyInClusterBackends(t *testing.T) {
	be := func(name, host string, key bool, forward any) obj {
		b := obj{"name": name, "endpoint": obj{"hostname": host}, "schema": obj{"name": "OpenAI"}}
		if key {
			b["apiKey"] = obj{"secretRef": obj{"name": "key-a", "key": "api-key"}}
		}
		if forward != nil {
			b["forwardCallerIdentity"] = forward
		}
		return b
	}
	cases := map[string]struct {
		reason  string
		backend obj
		input   obj
		// removed: the AIServiceBackend removes x-modelplane-caller.
		removed bool
	}{
		"ServiceFQDN":        {"A Service of the gateway cluster, by its full name.", be("local", "vllm.ml-team.svc.cluster.local", false, nil), nil, false},
		"ServiceShort":       {"A Service by its .svc name.", be("local", "vllm.ml-team.svc", false, nil), nil, false},
		"ThirdParty":         {"A hostname outside the cluster domain.", be("ext", "api.openrouter.ai", false, nil), nil, true},
		"OtherClusterSuffix": {"cluster.local is not this cluster's domain here: the Input says corp.internal.", be("local", "vllm.ml-team.svc.cluster.local", false, nil), obj{"clusterDomain": "corp.internal"}, true},
		"OwnDomain":          {"The Input's cluster domain counts as inside.", be("local", "vllm.ml-team.svc.corp.internal", false, nil), obj{"clusterDomain": "corp.internal"}, false},
		"InClusterWithKey":   {"An API key marks a third party's endpoint, even on a Service name.", be("gw", "litellm.ai.svc.cluster.local", true, nil), nil, true},
		"LookalikeSuffix":    {"svc must be a whole label: evil-svc.com is outside.", be("ext", "api.evil-svc.com", false, nil), nil, true},
		"OptIn":              {"A third party the team trusts with the identity.", be("ext", "api.partner.example", true, true), nil, false},
		"OptOut":             {"An in-cluster backend that must not see it.", be("local", "vllm.ml-team.svc.cluster.local", false, false), nil, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := newRequest(t, routeXR(tc.backend), observedRoute(true), map[string][]obj{"gateway": gwReady, "secret-key-a": keyA})
			if tc.input != nil {
				in := obj{"apiVersion": "inferencegateway.fn.crossplane.io/v1beta1", "kind": "Input"}
				maps.Copy(in, tc.input)
				req.Input = mustStruct(t, in)
			}
			rsp := run(t, req)
			m := manifest(rsp, "aibackend-"+tc.backend["name"].(string))
			if m == nil {
				t.Fatalf("no AIServiceBackend composed: %v", rsp.GetResults())
			}
			var want any
			if tc.removed {
				want = obj{"remove": []any{"x-modelplane-caller"}}
			}
			if diff := cmp.Diff(want, m["spec"].(obj)["headerMutation"]); diff != "" {
				t.Errorf("%s\nheaderMutation: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
