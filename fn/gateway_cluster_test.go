package fn

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/testing/protocmp"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// namedGateway is an InferenceGateway on the cluster gpu-cluster-1, created
// at the given time, with an address or not.
func namedGateway(name, created, addr string) obj {
	xr := gatewayXR(nil)
	xr["metadata"] = obj{"name": name, "creationTimestamp": created}
	if addr != "" {
		xr["status"] = obj{"address": addr}
	}
	return xr
}

// TestOneGatewayPerCluster runs the second InferenceGateway on a cluster
// that already has one: it composes nothing there, says
// ClusterAlreadyHasGateway naming the winner, and is no Fatal.
func TestOneGatewayPerCluster(t *testing.T) {
	prod := namedGateway("prod", "2026-12-01T04:00:00Z", "203.0.113.10")
	second := namedGateway("second", "2026-12-01T05:00:00Z", "")
	elsewhere := namedGateway("elsewhere", "2026-11-01T00:00:00Z", "198.51.100.1")
	elsewhere["spec"].(obj)["providerConfigName"] = "gpu-cluster-2"

	cases := map[string]struct {
		reason   string
		xr       obj
		observed map[string]obj
		list     []obj
		want     summary
		message  string
	}{
		"SecondGatewayLoses": {
			reason: "The second gateway on the cluster composes nothing and names the winner.",
			xr:     second,
			list:   []obj{elsewhere, prod, second},
			want: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_FALSE/ClusterAlreadyHasGateway"},
				Resources:  map[string]string{},
				XRReady:    "READY_FALSE",
			},
			message: `the InferenceGateway "prod" already composes the gateway`,
		},
		"WinnerUnmoved": {
			reason:   "The winner composes as before whatever the other gateways on the cluster.",
			xr:       prod,
			observed: observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true),
			list:     []obj{elsewhere, prod, second},
			want: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_TRUE/Serving"},
				Resources:  readiness(allGateway...),
				XRReady:    "READY_UNSPECIFIED",
				Results:    []string{openResult},
			},
		},
		"OtherClusterIgnored": {
			reason: "An older gateway on another cluster does not matter.",
			xr:     second,
			list:   []obj{elsewhere, second},
			want: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_FALSE/GatewayNotProgrammed"},
				Resources:  readiness(),
				XRReady:    "READY_FALSE",
				Results:    []string{openResult},
			},
		},
		"LoserReleasesWhatItComposed": {
			reason: "A loser that composed before it saw the winner makes its Objects observe-only, so letting them go never deletes the winner's objects; its observe-only Object goes at once.",
			xr:     second,
			observed: map[string]obj{
				"gateway":          object("gateway", gatewayManifest(""), true, false),
				"envoy-deployment": observeOnlyObject(object("envoy-deployment", nil, true, false)),
			},
			list: []obj{prod, second},
			want: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_FALSE/ClusterAlreadyHasGateway"},
				Resources:  map[string]string{"gateway": "READY_FALSE"},
				XRReady:    "READY_FALSE",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, newRequest(t, tc.xr, tc.observed, map[string][]obj{"inference-gateways": tc.list}))
			if diff := cmp.Diff(tc.want, summarize(rsp), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nRunFunction(...): -want, +got:\n%s", tc.reason, diff)
			}
			if msg := condition(rsp, "GatewayReady").GetMessage(); !strings.Contains(msg, tc.message) {
				t.Errorf("%s\nGatewayReady message %q does not contain %q", tc.reason, msg, tc.message)
			}
			want := &fnv1.ResourceSelector{ApiVersion: "modelplane.ai/v1alpha1", Kind: "InferenceGateway", Match: &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{}}}
			if diff := cmp.Diff(want, rsp.GetRequirements().GetResources()["inference-gateways"], protocmp.Transform()); diff != "" {
				t.Errorf("%s\nthe requirement for every InferenceGateway: -want, +got:\n%s", tc.reason, diff)
			}
			if g, ok := rsp.GetDesired().GetResources()["gateway"]; ok {
				ps := g.GetResource().AsMap()["spec"].(obj)["managementPolicies"]
				lost := strings.HasSuffix(tc.want.Conditions[0], "ClusterAlreadyHasGateway")
				if diff := cmp.Diff([]any{"Observe"}, ps); lost && diff != "" {
					t.Errorf("%s\nthe released gateway Object's managementPolicies: -want, +got:\n%s", tc.reason, diff)
				}
			}
		})
	}
}

func observeOnlyObject(o obj) obj {
	o["spec"].(obj)["managementPolicies"] = []any{"Observe"}
	return o
}
