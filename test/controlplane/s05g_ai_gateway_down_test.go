package controlplane

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/route"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// downRoute names the ModelRoute scenario 5g creates while AI Gateway is
// stopped.
const downRoute = "while-aigw-down"

// aiGatewayDown is scenario 5g: AI Gateway's controller stops, and a new
// ModelRoute is created on the ready gateway. The same process serves
// Envoy Gateway's extension server, which Envoy Gateway calls with
// fail-open off (gateway v1.8.3 api/v1alpha1/envoygateway_types.go,
// ExtensionManager.FailOpen, false by default: on a hook's error the xDS
// update is skipped and the previous state kept), and it generates the
// model's HTTPRoute, so nothing of the new route reaches Envoy: its RoutingReady
// must say False, with the reason and a message that point at AI Gateway,
// while the routes that served keep serving (the serving route
// RoutingReady=True throughout, by its recorded transitions). Started again, AI Gateway
// catches up, and the route becomes RoutingReady and appears in the xDS.
func (sc *scenarios) aiGatewayDown(t *testing.T) {
	c, s := sc.c, sc.s
	model := harness.TeamControlNS + "/" + downRoute
	serving := harness.TeamControlNS + "/" + harness.RouteName

	// The promise is about a route that serves: start from one the world
	// has recorded RoutingReady=True, not only one a poll saw True. The
	// scenario before (5f) ends on a poll, which can see the True before the
	// watch delivers it, or see a True Crossplane replayed from its cache
	// (crossplane/crossplane#7062) while the recorded verdict is still False.
	sc.eventually(t, waitSettle, "the serving ModelRoute recorded RoutingReady=True", func(ctx context.Context) string {
		sc.w.AwaitReplays(ctx, time.Now())
		if st := statusAt(sc.w.RouteTransitions(harness.TeamControlNS, harness.RouteName), time.Now()); st != "True" {
			return fmt.Sprintf("recorded RoutingReady=%q", st)
		}
		return wantCondition(sc.routeXR(ctx), route.ConditionType, "True")
	})
	s.Up.AIGW.Stop(10 * time.Second)
	stopped := time.Now()
	running := false
	defer func() {
		if !running {
			c.StartAIGateway(sc.ctx, s.Up, s.Up.AIGWImage)
		}
	}()
	c.Apply(sc.ctx, plainRoute(downRoute, "down."+harness.TeamControlNS+".svc.cluster.local"))

	// The function composes the route once its Backend and
	// AIServiceBackend exist, and provider-kubernetes creates it; no one
	// writes its status.
	sc.eventually(t, waitRoute, "the new ModelRoute's AIGatewayRoute on the gateway cluster, without status", func(ctx context.Context) string {
		o := sc.composedObject(ctx, harness.TeamControlNS, downRoute, "route")
		if o == nil || harness.ConditionStatus(o, "Synced") != "True" {
			return "the route Object is not created and Synced yet"
		}
		return ""
	})
	// Long enough for AI Gateway, were it running, to accept the route
	// and Envoy Gateway to translate it, and for the function to look
	// again at its TTL.
	hold := time.Now().Add(30 * time.Second)
	sc.eventually(t, time.Minute, "30 s of the new ModelRoute waiting for AI Gateway", func(ctx context.Context) string {
		u, err := sc.get(ctx, harness.GVRModelRoute, harness.TeamControlNS, downRoute)
		if err != nil {
			return err.Error()
		}
		if st := harness.ConditionStatus(u, route.ConditionType); st == "True" {
			t.Fatalf("RoutingReady=True %s after AI Gateway stopped, which never saw the route", time.Since(stopped).Round(time.Second))
		}
		if r := harness.ConditionReason(u, route.ConditionType); r != route.ReasonWaitingForRoute {
			return fmt.Sprintf("RoutingReady reason %q (%v), want %s", r, harness.Condition(u, route.ConditionType)["message"], route.ReasonWaitingForRoute)
		}
		if msg := fmt.Sprint(harness.Condition(u, route.ConditionType)["message"]); !strings.Contains(msg, "AI Gateway's controller runs") {
			return fmt.Sprintf("RoutingReady message %q does not say to look at AI Gateway's controller", msg)
		}
		if time.Now().Before(hold) {
			return "holding"
		}
		return ""
	})
	u, _ := sc.get(sc.ctx, harness.GVRModelRoute, harness.TeamControlNS, downRoute)
	t.Logf("scenario 5g: with AI Gateway stopped, the new ModelRoute says RoutingReady=False (%s): %v",
		harness.ConditionReason(u, route.ConditionType), harness.Condition(u, route.ConditionType)["message"])
	sc.readXDS(t, "scenario-5g-down", func(d xdsDump) string {
		if r, _ := d.modelRoute(serving); r == nil {
			return fmt.Sprintf("the serving model %q has no route", serving)
		}
		if r, _ := d.modelRoute(model); r != nil {
			t.Fatalf("Envoy is told to route %q while AI Gateway is stopped: %v", model, r)
		}
		return ""
	})

	c.StartAIGateway(sc.ctx, s.Up, s.Up.AIGWImage)
	running = true
	started := time.Now()
	sc.eventually(t, waitRoute, "the new ModelRoute RoutingReady=True once AI Gateway runs again", func(ctx context.Context) string {
		u, err := sc.get(ctx, harness.GVRModelRoute, harness.TeamControlNS, downRoute)
		if err != nil {
			return err.Error()
		}
		return wantCondition(u, route.ConditionType, "True")
	})
	t.Logf("scenario 5g: RoutingReady=True %s after AI Gateway started again", time.Since(started).Round(100*time.Millisecond))
	// The serving route, by every change the world recorded, not only by
	// the polls above: a False between two polls would be an outage of a
	// model that AI Gateway's absence does not touch.
	if msg := trueThroughout(sc.w.RouteTransitions(harness.TeamControlNS, harness.RouteName), stopped, started); msg != "" {
		t.Errorf("the serving ModelRoute %s did not stay RoutingReady=True while AI Gateway was stopped: %s", serving, msg)
	}
	if ts := since(sc.w.RouteTransitions(harness.TeamControlNS, harness.RouteName), stopped); len(ts) > 0 {
		t.Logf("scenario 5g: the serving ModelRoute's RoutingReady transitions from AI Gateway's stop until the new route routed:\n%s", harness.FormatTransitions(stopped, ts))
	} else {
		t.Logf("scenario 5g: the serving ModelRoute's RoutingReady did not change from AI Gateway's stop until the new route routed")
	}
	sc.readXDS(t, "scenario-5g-up", all(
		checkFailover(model, []int64{0}, []int64{429, 503}, int64(v1alpha1.DefaultNumRetries)),
		func(d xdsDump) string {
			if r, _ := d.modelRoute(serving); r == nil {
				return fmt.Sprintf("the serving model %q has no route", serving)
			}
			return ""
		},
	))

	// Leave the control plane as scenario 6 expects it: one ModelRoute.
	sc.deleteRoute(t, downRoute, "scenario 5g deletes its ModelRoute")
}
