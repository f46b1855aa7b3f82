package controlplane

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// envoyDeploymentRecreated is scenario 4b, the other order of the race
// between the first Envoy pods and AI Gateway's filter-config Secret. The
// Envoy Deployment is deleted, and Envoy Gateway restarted: v1.8.1 did not
// create a deleted Deployment again by itself within 3 minutes here, nor
// does v1.8.3, whose infrastructure runner is the same (it
// applies its infrastructure when it gets an update of the infrastructure
// IR: internal/infrastructure/runner/runner.go,
// updateProxyInfraFromSubscription), but does at start. The
// Secret and the routes are still there, so AI Gateway's webhook gives the
// new Deployment's very first pods the sidecar, and AI Gateway v1.0.0,
// which writes its uuid marker only when pods and routes disagree
// (internal/controller/gateway.go, annotateGatewayPods), writes none.
// GatewayReady must still reach True, from the function's own marker, and
// the sidecar invariant must hold throughout.
func (sc *scenarios) envoyDeploymentRecreated(t *testing.T) {
	d := sc.envoyDeployment(sc.ctx)
	if d == nil {
		t.Fatal("no Envoy Deployment")
	}
	name, uid := d.GetName(), d.GetUID()
	sc.w.Allow(harness.Allowance{Reason: "scenario 4b deletes the Envoy Deployment", Resource: "deployments", Namespace: harness.EnvoyGatewayNS, Name: name})
	from := time.Now()
	bg := metav1.DeletePropagationBackground
	harness.Must(t, sc.c.Dyn.Resource(harness.GVRDeployment).Namespace(harness.EnvoyGatewayNS).Delete(sc.ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg}))
	sc.eventually(t, waitSettle, "the Envoy Deployment gone", func(ctx context.Context) string {
		if d := sc.envoyDeployment(ctx); d != nil && d.GetUID() == uid {
			return "still there"
		}
		return ""
	})
	sc.c.RestartEnvoyGateway(sc.s.Up)
	// How the InferenceGateway looks while its verdict is stale: whether
	// Crossplane's circuit breaker holds its watch events back.
	stale := make(chan string, 1)
	go func() {
		select {
		case <-sc.ctx.Done():
			stale <- "(ended)"
		case <-time.After(10 * time.Second):
			if xr := sc.gatewayXR(sc.ctx); xr != nil {
				stale <- harness.ConditionsSummary(xr)
			} else {
				stale <- "(no InferenceGateway)"
			}
		}
	}()
	defer func() { t.Logf("scenario 4b: 10 s after the deletion the InferenceGateway said %s", <-stale) }()
	sc.eventually(t, waitSettle, "Envoy Gateway to create the Envoy Deployment again", func(ctx context.Context) string {
		d := sc.envoyDeployment(ctx)
		if d == nil {
			return "no Envoy Deployment"
		}
		if d.GetUID() == uid {
			return "still the old Deployment"
		}
		return ""
	})
	newUID := sc.envoyDeployment(sc.ctx).GetUID()
	// GatewayReady goes False on the new Deployment (no marker), and only
	// then True again. Until the function runs it still says the old
	// Deployment's True: a stale verdict, measured below.
	var down time.Time
	sc.eventually(t, waitSettle, "GatewayReady=False on the new Deployment", func(ctx context.Context) string {
		gw, _ := sc.w.Transitions()
		at, ok := firstAfter(gw, from, "False")
		if !ok {
			return "GatewayReady has not left True since the deletion"
		}
		down = at
		return ""
	})
	// True again only for the new Deployment rolled out with the
	// function's marker, as the function saw it (its status.rollout
	// names that generation).
	sc.eventually(t, waitSettle, "GatewayReady=True on the new Deployment with the function's marker", func(ctx context.Context) string {
		d := sc.envoyDeployment(ctx)
		if d == nil || d.GetUID() != newUID {
			return "the Deployment changed again"
		}
		if v, _, _ := unstructured.NestedString(d.Object, "spec", "template", "metadata", "annotations", harness.OwnMarker); v == "" {
			return "no " + harness.OwnMarker + " on the template yet"
		}
		if v, err := sc.w.Rule.Evaluate(d.Object); err != nil || !v.Ready {
			return fmt.Sprintf("the rule does not hold on the Deployment yet: %v %v", v.Failed, err)
		}
		xr := sc.gatewayXR(ctx)
		if g := harness.Int64At(xr.Object, "status", "rollout", "generation"); g != d.GetGeneration() {
			return fmt.Sprintf("the InferenceGateway reports generation %d, the Deployment is at %d", g, d.GetGeneration())
		}
		return wantCondition(xr, "GatewayReady", "True")
	})
	t.Logf("scenario 4b: GatewayReady left True %.2fs after the deletion (the function's first reconcile that saw the new Deployment)", seconds(down.Sub(from)))
	st := sc.agree(t)
	gw, _ := sc.w.Transitions()
	t.Logf("scenario 4b: GatewayReady transitions (seconds since the deletion):\n%s", harness.FormatTransitions(from, gw))
	for _, m := range sc.w.MarkerChanges() {
		if m.UID == string(newUID) {
			t.Logf("scenario 4b: %s", m)
		}
	}
	if st != "True" {
		t.Errorf("settled GatewayReady=%s, want True", st)
	}
	created := sc.w.PodsCreated(from)
	for _, rs := range created {
		t.Logf("scenario 4b: %s", rs)
	}
	// The first ReplicaSet after the deletion is the new Deployment's
	// first; its pods must have had the sidecar at creation, or this run
	// did not show the order it is here for.
	var first *harness.ReplicaSetPods
	for i := range created {
		if created[i].First.After(from) {
			first = &created[i]
			break
		}
	}
	switch {
	case first == nil:
		t.Errorf("no Envoy pod was created after the Deployment was deleted")
	case first.WithSidecar != first.Pods:
		t.Errorf("the new Deployment's first pods lacked the sidecar (%s): the race went the usual way, not the one this scenario shows", first)
	}
	var ai, own int
	for _, m := range sc.w.MarkerChanges() {
		if m.UID == string(newUID) && m.Values[harness.AIGWUUID] != "" {
			ai++
		}
		if m.UID == string(newUID) && m.Values[harness.OwnMarker] != "" {
			own++
		}
	}
	if own == 0 {
		t.Errorf("GatewayReady=True on the new Deployment, whose template never had the function's %s", harness.OwnMarker)
	}
	t.Logf("scenario 4b: on the new Deployment, %d template states with AI Gateway's uuid, %d with the function's own marker", ai, own)
	sc.eventually(t, waitRoute, "RoutingReady=True again", func(ctx context.Context) string {
		return wantCondition(sc.routeXR(ctx), "RoutingReady", "True")
	})
	sc.podsHaveSidecar(t, sc.s.Up.AIGWImage)
	sc.noDeletions(t)
	sc.w.Check(t)
}
