package fn

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// fleetXR is routeXR(a: keyed, b: plain) with spec.gatewaySelector
// region=eu instead of spec.gatewayName.
func fleetXR(selector obj) obj {
	xr := routeXR(backend("a", 1, 1, "key-a"), backend("b", 0, 1, ""))
	spec := xr["spec"].(obj)
	delete(spec, "gatewayName")
	spec["gatewaySelector"] = selector
	return xr
}

// fleetGateway is a GatewayReady (or not, with reason) InferenceGateway
// name on the cluster of its own name, labelled region.
func fleetGateway(name, region string, ready bool, reason string) obj {
	g := inferenceGateway(ready, reason, false)
	g["metadata"] = obj{"name": name, "labels": obj{"region": region}}
	g["spec"] = obj{"providerConfigName": "cluster-" + name}
	return g
}

// fleetObserved is observedRoute under each gateway's name.
func fleetObserved(gateways ...string) map[string]obj {
	out := map[string]obj{}
	for _, gw := range gateways {
		for k, o := range observedRoute(true) {
			out[gw+"/"+k] = o
		}
	}
	return out
}

var euSelector = obj{"matchLabels": obj{"region": "eu"}}

// fleetKeys are the composed resources of rsp under gateway gw.
func fleetKeys(rsp *fnv1.RunFunctionResponse, gw string) []string {
	var out []string
	for k := range rsp.GetDesired().GetResources() {
		if rest, ok := strings.CutPrefix(k, gw+"/"); ok {
			out = append(out, rest)
		}
	}
	slices.Sort(out)
	return out
}

func TestRunFunctionFleetRoute(t *testing.T) {
	eu1, eu2, us1 := fleetGateway("eu-1", "eu", true, "Serving"), fleetGateway("eu-2", "eu", true, "Serving"), fleetGateway("us-1", "us", true, "Serving")
	served := slices.Sorted(maps.Keys(observedRoute(true)))
	lost := fleetGateway("eu-2", "eu", false, "ClusterAlreadyHasGateway")
	deleting := fleetGateway("eu-2", "eu", true, "Serving")
	deleting["metadata"].(obj)["deletionTimestamp"] = "2026-12-07T00:00:00Z"
	relabelled := fleetGateway("eu-2", "us", true, "Serving")

	type want struct {
		condition string
		routed    string
		// keys are the composed resources under each gateway's name.
		keys map[string][]string
		// message holds these.
		message []string
	}
	cases := map[string]struct {
		reason   string
		selector obj
		observed map[string]obj
		gateways []obj // nil: not fetched yet
		want     want
	}{
		"BothRouting": {
			reason:   "Two of three gateways match and both route the model: True, each composed as a gatewayName route would be.",
			selector: euSelector, observed: fleetObserved("eu-1", "eu-2"), gateways: []obj{eu1, eu2, us1},
			want: want{condition: "TRUE/RouteAccepted", routed: "2/2", keys: map[string][]string{"eu-1": served, "eu-2": served, "us-1": nil},
				message: []string{"every InferenceGateway", "eu-1, eu-2"}},
		},
		"ExpressionsOnly": {
			reason:   "A selector of matchExpressions alone is applied by the function to every gateway Crossplane lists.",
			selector: obj{"matchExpressions": []any{obj{"key": "region", "operator": "NotIn", "values": []any{"us"}}}},
			observed: fleetObserved("eu-1", "eu-2"), gateways: []obj{eu1, eu2, us1},
			want: want{condition: "TRUE/RouteAccepted", routed: "2/2", keys: map[string][]string{"eu-1": served, "eu-2": served, "us-1": nil}},
		},
		"OneRollingOut": {
			reason:   "One gateway rolling out turns RoutingReady False naming it, and changes nothing composed anywhere.",
			selector: euSelector, observed: fleetObserved("eu-1", "eu-2"), gateways: []obj{eu1, fleetGateway("eu-2", "eu", false, "OldReplicasPresent"), us1},
			want: want{condition: "FALSE/WaitingForGateways", routed: "1/2", keys: map[string][]string{"eu-1": served, "eu-2": served},
				message: []string{"1 of the 2", "eu-2 (WaitingForGateway:", "OldReplicasPresent"}},
		},
		"Relabelled": {
			reason:   "A gateway that stops matching loses the model: its objects are no longer desired; the other's are untouched.",
			selector: euSelector, observed: fleetObserved("eu-1", "eu-2"), gateways: []obj{eu1, relabelled, us1},
			want: want{condition: "TRUE/RouteAccepted", routed: "1/1", keys: map[string][]string{"eu-1": served, "eu-2": nil}},
		},
		"LostCluster": {
			reason:   "A gateway that lost its cluster is listed, not counted, and composes nothing.",
			selector: euSelector, observed: fleetObserved("eu-1", "eu-2"), gateways: []obj{eu1, lost},
			want: want{condition: "TRUE/RouteAccepted", routed: "1/2", keys: map[string][]string{"eu-1": served, "eu-2": nil},
				message: []string{"not counted: eu-2 (GatewayLostCluster:"}},
		},
		"Deleting": {
			reason:   "A gateway being deleted is listed, not counted, and composes nothing.",
			selector: euSelector, observed: fleetObserved("eu-1", "eu-2"), gateways: []obj{eu1, deleting},
			want: want{condition: "TRUE/RouteAccepted", routed: "1/2", keys: map[string][]string{"eu-1": served, "eu-2": nil},
				message: []string{"eu-2 (GatewayDeleting:"}},
		},
		"OnlyLostCluster": {
			reason:   "With no counted gateway, the route does not serve: False.",
			selector: euSelector, observed: fleetObserved("eu-2"), gateways: []obj{lost},
			want: want{condition: "FALSE/WaitingForGateways", routed: "0/1", keys: map[string][]string{"eu-2": nil}},
		},
		"NoneMatch": {
			reason:   "No gateway matches: NoGatewaySelected, naming the selector.",
			selector: obj{"matchLabels": obj{"region": "ap"}}, gateways: []obj{eu1, us1},
			want: want{condition: "FALSE/NoGatewaySelected", routed: "0/0", keys: map[string][]string{"eu-1": nil}, message: []string{"spec.gatewaySelector region=ap"}},
		},
		"NotFetched": {
			reason:   "Until Crossplane has fetched the gateways, everything composed is carried forward: nothing is deleted on missing input.",
			selector: euSelector, observed: fleetObserved("eu-1", "eu-2"),
			want: want{condition: "FALSE/WaitingForGateway", routed: "0/0", keys: map[string][]string{"eu-1": served, "eu-2": served}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var required map[string][]obj
			if tc.gateways != nil {
				required = map[string][]obj{"gateways": tc.gateways, "secret-key-a": keyA}
			}
			rsp := run(t, newRequest(t, fleetXR(tc.selector), tc.observed, required))
			c := condition(rsp, "RoutingReady")
			st := status(rsp)
			got := want{condition: strings.TrimPrefix(c.GetStatus().String(), "STATUS_CONDITION_") + "/" + c.GetReason(), routed: st["routed"].(string), keys: map[string][]string{}, message: tc.want.message}
			for gw := range tc.want.keys {
				got.keys[gw] = fleetKeys(rsp, gw)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s\n(message: %s)", tc.reason, diff, c.GetMessage())
			}
			for _, m := range tc.want.message {
				if !strings.Contains(c.GetMessage(), m) {
					t.Errorf("%s\nRoutingReady's message %q lacks %q", tc.reason, c.GetMessage(), m)
				}
			}
		})
	}
}

func TestRunFunctionFleetRequirements(t *testing.T) {
	cases := map[string]struct {
		reason   string
		selector obj
		want     *fnv1.ResourceSelector
	}{
		"MatchLabels": {
			reason:   "Crossplane is asked for the gateways the selector's labels select.",
			selector: euSelector,
			want: &fnv1.ResourceSelector{ApiVersion: "modelplane.ai/v1alpha1", Kind: "InferenceGateway",
				Match: &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: map[string]string{"region": "eu"}}}},
		},
		"ExpressionsOnly": {
			reason:   "With matchExpressions alone, every gateway is asked for, and the function applies the expressions.",
			selector: obj{"matchExpressions": []any{obj{"key": "region", "operator": "Exists"}}},
			want: &fnv1.ResourceSelector{ApiVersion: "modelplane.ai/v1alpha1", Kind: "InferenceGateway",
				Match: &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: map[string]string{}}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, newRequest(t, fleetXR(tc.selector), nil, nil))
			rs := rsp.GetRequirements().GetResources()
			if diff := cmp.Diff(tc.want, rs["gateways"], protocmp.Transform()); diff != "" {
				t.Errorf("%s\nrequirement gateways: -want, +got:\n%s", tc.reason, diff)
			}
			if _, ok := rs["gateway"]; ok {
				t.Errorf("%s\na fleet route also asks for one gateway by name: %v", tc.reason, rs["gateway"])
			}
			if _, ok := rs["secret-key-a"]; !ok {
				t.Errorf("%s\na fleet route does not ask for its backends' Secrets: %v", tc.reason, slices.Sorted(maps.Keys(rs)))
			}
		})
	}
}

func TestRunFunctionFleetRefused(t *testing.T) {
	both := fleetXR(euSelector)
	both["spec"].(obj)["gatewayName"] = "inference-gateway"
	neither := fleetXR(euSelector)
	delete(neither["spec"].(obj), "gatewaySelector")
	empty := fleetXR(obj{})
	badOp := fleetXR(obj{"matchExpressions": []any{obj{"key": "region", "operator": "Near"}}})
	cases := map[string]struct {
		reason string
		xr     obj
		want   []string
	}{
		"Both":    {reason: "Both fields set is refused, naming both.", xr: both, want: []string{"both spec.gatewayName", "spec.gatewaySelector", "set exactly one"}},
		"Neither": {reason: "Neither field set is refused, naming both.", xr: neither, want: []string{"neither spec.gatewayName nor spec.gatewaySelector"}},
		"Empty":   {reason: "An empty selector is refused rather than taking in every gateway.", xr: empty, want: []string{"spec.gatewaySelector selects nothing"}},
		"BadOperator": {reason: "An operator Kubernetes does not know is refused, naming the selector.", xr: badOp,
			want: []string{"spec.gatewaySelector", "is not a label selector"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Log(tc.reason)
			rsp := run(t, newRequest(t, tc.xr, nil, map[string][]obj{"gateways": {fleetGateway("eu-1", "eu", true, "Serving")}}))
			expectFatal(t, rsp, tc.want...)
		})
	}
}
