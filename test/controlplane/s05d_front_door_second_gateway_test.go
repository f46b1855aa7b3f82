package controlplane

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/route"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// The front door's scenarios: the health route served beside the
// unserved anchor, a second InferenceGateway on the same cluster, and a
// change of an Envoy setting on the live gateway.

// secondGateway is scenario 5d, after frontDoorServed: a second InferenceGateway on the same
// providerConfigName. It composes nothing, says GatewayReady=False with
// ClusterAlreadyHasGateway naming the first, and nothing of the first
// changes or goes, while the second is created, deleted and recreated.
func (sc *scenarios) secondGateway(t *testing.T) {
	sc.frontDoorServed(t)
	before, err := sc.gatewayState(sc.ctx)
	if err != nil {
		t.Fatal(err)
	}
	sc.w.Allow(harness.Allowance{Reason: "scenario 5d deletes the second InferenceGateway", Resource: "inferencegateways", Name: secondXRName})
	for round := 1; round <= 2; round++ {
		xr := sc.c.ReadYAMLFile(harness.GatewayXRFile)[0]
		xr.SetName(secondXRName)
		sc.c.Create(sc.ctx, harness.GVRInferenceGW, xr)
		sc.eventually(t, waitSettle, "the second gateway to say ClusterAlreadyHasGateway", func(ctx context.Context) string {
			u, err := sc.get(ctx, harness.GVRInferenceGW, "", secondXRName)
			if err != nil {
				return err.Error()
			}
			if r := harness.ConditionReason(u, gateway.ConditionType); harness.ConditionStatus(u, gateway.ConditionType) != "False" || r != gateway.ReasonClusterAlreadyHasGateway {
				return fmt.Sprintf("GatewayReady=%s (%s)", harness.ConditionStatus(u, gateway.ConditionType), r)
			}
			if msg, _ := harness.Condition(u, gateway.ConditionType)["message"].(string); !strings.Contains(msg, `"`+harness.GatewayXRName+`"`) {
				return "the message does not name the winner: " + msg
			}
			// Each records the winner in status.clusterGateway, which
			// the XRD must keep (Crossplane prunes a status field the
			// schema lacks).
			if got, _, _ := unstructured.NestedString(u.Object, "status", "clusterGateway"); got != harness.GatewayXRName {
				return fmt.Sprintf("the second gateway's status.clusterGateway is %q, want %q", got, harness.GatewayXRName)
			}
			first := sc.gatewayXR(ctx)
			if first == nil {
				return "the first gateway is not found"
			}
			if got, _, _ := unstructured.NestedString(first.Object, "status", "clusterGateway"); got != harness.GatewayXRName {
				return fmt.Sprintf("the first gateway's status.clusterGateway is %q, want its own name (its claim)", got)
			}
			return ""
		})
		if round == 1 {
			sc.routeOnLostGateway(t)
		}
		// A few of the second gateway's reconciles: it must stay empty.
		time.Sleep(5 * time.Second)
		if l, err := sc.c.Dyn.Resource(harness.GVRObject).Namespace(harness.ObjectNS).List(sc.ctx, metav1.ListOptions{LabelSelector: harness.LabelComposite + "=" + secondXRName}); err != nil || len(l.Items) > 0 {
			t.Errorf("round %d: the second gateway composed %d Objects (%v); want none", round, len(l.Items), err)
		}
		if w := wantCondition(sc.gatewayXR(sc.ctx), gateway.ConditionType, "True"); w != "" {
			t.Errorf("round %d: the first gateway is no longer GatewayReady: %s", round, w)
		}
		after, err := sc.gatewayState(sc.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(before) != fmt.Sprint(after) {
			t.Errorf("round %d: the first gateway changed: before %v, after %v", round, before, after)
		}
		if err := sc.c.Dyn.Resource(harness.GVRInferenceGW).Delete(sc.ctx, secondXRName, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("cannot delete the second gateway: %v", err)
		}
		sc.eventually(t, waitSettle, "the second gateway to be gone", func(ctx context.Context) string {
			if _, err := sc.get(ctx, harness.GVRInferenceGW, "", secondXRName); !apierrors.IsNotFound(err) {
				return fmt.Sprintf("still there (%v)", err)
			}
			return ""
		})
	}
	if w := wantCondition(sc.gatewayXR(sc.ctx), gateway.ConditionType, "True"); w != "" {
		t.Errorf("the first gateway after the second went: %s", w)
	}
	sc.noDeletions(t)
	sc.w.Check(t)
}

// frontDoorServed checks what Envoy Gateway makes of the front door: the health route, in the front-door namespace, is Accepted
// on the http listener with its HTTPRouteFilter resolved, while the
// anchor's HTTPRoute in the gateway namespace stays NotAllowedByListeners.
func (sc *scenarios) frontDoorServed(t *testing.T) {
	t.Helper()
	fd := names.FrontDoorNamespace(harness.GatewayNS)
	health := names.Child(harness.GatewayXRName, names.HealthSuffix)
	sc.eventually(t, waitSettle, "the health route accepted on the http listener", func(ctx context.Context) string {
		hr, err := sc.get(ctx, harness.GVRHTTPRoute, fd, health)
		if err != nil {
			return err.Error()
		}
		p := parentStatus(hr, harness.GatewayNS, harness.GatewayXRName)
		if p == nil {
			return "no status.parents entry for the Gateway"
		}
		if a, r := parentCondition(p, "Accepted"), parentCondition(p, "ResolvedRefs"); a != "True (Accepted)" || r != "True (ResolvedRefs)" {
			return fmt.Sprintf("Accepted=%s, ResolvedRefs=%s", a, r)
		}
		if _, err := sc.get(ctx, harness.GVREGSecurityPolicy, fd, names.Child(harness.GatewayXRName, names.FrontDoorSuffix)); err != nil {
			return "the front door's SecurityPolicy: " + err.Error()
		}
		return ""
	})
	hr, err := sc.get(sc.ctx, harness.GVRHTTPRoute, harness.GatewayNS, names.AnchorRoute(harness.GatewayXRName))
	if err != nil {
		t.Fatalf("cannot get the anchor's HTTPRoute: %v", err)
	}
	if a := parentCondition(parentStatus(hr, harness.GatewayNS, harness.GatewayXRName), "Accepted"); a != "False (NotAllowedByListeners)" {
		t.Errorf("the anchor's HTTPRoute is Accepted=%s beside the front door; want False (NotAllowedByListeners)", a)
	}
}

// lostRoute names the ModelRoute scenario 5d puts on the second gateway,
// the one that lost the cluster.
const lostRoute = "on-lost-gateway"

// routeOnLostGateway is issue 21's item 4 for a lost cluster: a ModelRoute
// that names the InferenceGateway which lost its cluster says so,
// GatewayLostCluster, and does not spin. Its gateway's condition and the
// cluster's gateway-status ConfigMap disagree for good (the ConfigMap is
// the winner's, True), and only a person's act ends that, so the route is
// looked at again every 10 s (route.StuckGatewayRequeue), not every
// second: over a minute, Crossplane calls the function for it about once
// per 10 s, give or take a few watch events.
func (sc *scenarios) routeOnLostGateway(t *testing.T) {
	t.Helper()
	c := sc.c
	r := plainRoute(lostRoute, "lost."+harness.TeamControlNS+".svc.cluster.local")
	spec := r.Object["spec"].(map[string]any)
	spec["gatewayName"] = secondXRName
	c.Apply(sc.ctx, r)
	sc.eventually(t, waitRoute, "the ModelRoute on the lost gateway to say GatewayLostCluster", func(ctx context.Context) string {
		u, err := sc.get(ctx, harness.GVRModelRoute, harness.TeamControlNS, lostRoute)
		if err != nil {
			return err.Error()
		}
		if st, rs := harness.ConditionStatus(u, route.ConditionType), harness.ConditionReason(u, route.ConditionType); st != "False" || rs != route.ReasonGatewayLostCluster {
			return fmt.Sprintf("RoutingReady=%s (%s): %v", st, rs, harness.Condition(u, route.ConditionType)["message"])
		}
		return ""
	})
	u, _ := sc.get(sc.ctx, harness.GVRModelRoute, harness.TeamControlNS, lostRoute)
	msg := fmt.Sprint(harness.Condition(u, route.ConditionType)["message"])
	if !strings.Contains(msg, secondXRName) {
		t.Errorf("RoutingReady's message does not name the gateway %q: %s", secondXRName, msg)
	}
	t.Logf("scenario 5d: the ModelRoute on the gateway that lost its cluster: RoutingReady=False (%s): %s", route.ReasonGatewayLostCluster, msg)

	// Let its creation's events pass, then count the calls.
	time.Sleep(20 * time.Second)
	from := time.Now()
	const window = 60 * time.Second
	time.Sleep(window)
	calls, err := c.FunctionCallTimes("ModelRoute", lostRoute, from, from.Add(window))
	harness.Must(t, err)
	// One reconcile calls the function twice, a few milliseconds apart:
	// the first call asks for the required resources (the InferenceGateway,
	// the API-key Secrets), and Crossplane calls again with them until the
	// requirements stop changing (crossplane v2.3.0 and v2.2.0
	// internal/xfn/required_resources.go, FetchingFunctionRunner.RunFunction).
	reconciles := bursts(calls, time.Second)
	if msg := stuckReconcilesProblem(len(reconciles), window); msg != "" {
		t.Errorf("Crossplane reconciled the ModelRoute on the lost gateway %d times in %s: %s; calls at %v", len(reconciles), window, msg, calls)
	}
	sc.sp.Record("scenario-5d", "stuck-route-reconciles", float64(len(reconciles)))
	t.Logf("scenario 5d: %d reconciles (%d function calls) of the ModelRoute on the lost gateway in %s, at %v", len(reconciles), len(calls), window, reconciles)
	sc.deleteRoute(t, lostRoute, "scenario 5d deletes its ModelRoute on the lost gateway")
}
