package controlplane

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// templateChange is scenario 3: AI Gateway's ext-proc inputs change (an
// upgrade), so it writes a new marker value into the pod template and the
// Deployment controller rolls. While the controller's own counters show
// old-template pods, GatewayReady must be False; after, True. The new
// pods are held until the route has followed the gateway down, for
// outageHold at least; the route must come back after, and a stale False
// must end within staleFalseBound (checkFollow). Nothing the ModelRoute
// composed is deleted.
func (sc *scenarios) templateChange(t *testing.T) {
	s := sc.s
	before := markerWrites(sc.w.MarkerChanges(), harness.AIGWUUID)
	gen := sc.envoyDeployment(sc.ctx).GetGeneration()
	// A live gateway and route: their creation opened their circuit
	// breakers, whose cooldown passes while the API server's request
	// rate at rest is measured.
	rest, _, cpu := sc.restPastBreakers(t)
	sc.sp.Record("scenario-3", evRateAtRest, rest.Total)
	t.Logf("at rest, one gateway and one model: %s; CPU %s", rest, cpu)
	// Pods of the new template are held, so the old ones surely remain
	// while the function and the provider look.
	s.Kubelet.SetHold(true)
	start, err := sc.c.CountRequests(sc.ctx)
	harness.Must(t, err)
	// An upgrade of AI Gateway with a new ext-proc image: v1.0.0 counts a
	// pod whose sidecar has another image as one without
	// (internal/controller/gateway.go, checkPodHasSideCar), so it writes a
	// new uuid into the template and the Deployment controller rolls.
	upgraded := harness.ExtProcImage + "-upgrade.1"
	sc.c.RestartAIGateway(sc.ctx, s.Up, upgraded)

	sc.eventually(t, waitSettle, "the new marker and old-template pods", func(ctx context.Context) string {
		if markerWrites(sc.w.MarkerChanges(), harness.AIGWUUID) == before {
			return "no new marker patch yet"
		}
		return sc.oldTemplatePodsCounted(ctx, gen)
	})
	if st := sc.agree(t); st != "False" {
		t.Fatalf("GatewayReady=%s while the Deployment controller counts old-template pods", st)
	}
	xr := sc.gatewayXR(sc.ctx)
	ro, _, _ := unstructured.NestedMap(xr.Object, "status", "rollout")
	t.Logf("during the rollout: GatewayReady=%s (%s): %v; status.rollout %v", harness.ConditionStatus(xr, gateway.ConditionType),
		harness.ConditionReason(xr, gateway.ConditionType), harness.Condition(xr, gateway.ConditionType)["message"], ro)

	// Held long enough that the route must follow the gateway down
	// (holdOutage).
	gf := sc.recordedGateway(t, start.At, "False")
	sc.holdOutage(t, []string{harness.RouteName}, gf)
	released := time.Now()
	s.Kubelet.SetHold(false)
	sc.eventually(t, waitSettle, "the rollout to finish", func(ctx context.Context) string {
		d := sc.envoyDeployment(ctx)
		want := harness.Int64At(d.Object, "spec", "replicas")
		if harness.Int64At(d.Object, "status", "observedGeneration") < d.GetGeneration() ||
			harness.Int64At(d.Object, "status", "replicas") != want || harness.Int64At(d.Object, "status", "updatedReplicas") != want ||
			harness.Int64At(d.Object, "status", "availableReplicas") != want {
			return fmt.Sprintf("status %v", d.Object["status"])
		}
		return ""
	})
	sc.eventually(t, waitSettle, "GatewayReady=True", func(ctx context.Context) string {
		return wantCondition(sc.gatewayXR(ctx), gateway.ConditionType, "True")
	})
	if st := sc.agree(t); st != "True" {
		t.Errorf("settled GatewayReady=%s after the rollout, want True", st)
	}
	sc.podsHaveSidecar(t, upgraded)
	// RoutingReady followed the gateway down; it comes back.
	sc.eventually(t, waitRoute, "RoutingReady=True again", func(ctx context.Context) string {
		return wantCondition(sc.routeXR(ctx), "RoutingReady", "True")
	})
	gr := sc.recordedGateway(t, gf, "True")
	if gr.Before(released) {
		t.Errorf("GatewayReady=True %s before the held pods were released", released.Sub(gr).Round(time.Millisecond))
	}
	sc.checkFollow(t, "scenario-3", []string{harness.RouteName}, gf, gr, true)
	end, err := sc.c.CountRequests(sc.ctx)
	harness.Must(t, err)
	sc.recordRollout(t, "scenario-3", start, released, end)
	sc.noDeletions(t)
	sc.w.Check(t)
}

// recordRollout records when, after the pods were released, the
// envoy-deployment Object, GatewayReady and RoutingReady turned True, in
// seconds since the rollout began (start), and the request rate from
// start to end.
func (sc *scenarios) recordRollout(t *testing.T, name string, start harness.Requests, released time.Time, end harness.Requests) {
	t.Helper()
	gw, rt := sc.w.Transitions()
	obj := sc.w.ObjectTransitions()
	rel := func(at time.Time) float64 { return seconds(at.Sub(start.At)) }
	sc.sp.Record(name, "pods-released", rel(released))
	if at, ok := firstAfter(obj, released, "True"); ok {
		sc.sp.Record(name, evObjectReady, rel(at))
	}
	gr, ok := firstAfter(gw, released, "True")
	if ok {
		sc.sp.Record(name, evGatewayReady, rel(gr))
		if at, ok := firstAfter(rt, start.At, "False"); ok && at.Before(gr) {
			sc.sp.Record(name, "routing-not-ready", rel(at))
		}
		if at, ok := firstAfter(rt, gr, "True"); ok {
			sc.sp.Record(name, evRoutingReady, rel(at))
		} else if lastStatusBefore(rt, gr) == "True" {
			t.Logf("%s: RoutingReady never left True during the rollout", name)
		}
	}
	r := sc.c.RateBetween(start, end)
	sc.sp.Record(name, evRateRollout, r.Total)
	t.Logf("%s: during the rollout, %s over %s", name, r, end.At.Sub(start.At).Round(time.Second))
}
