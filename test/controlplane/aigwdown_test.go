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
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/route"
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
	model := teamControlNS + "/" + downRoute
	serving := teamControlNS + "/" + routeName

	// The promise is about a route that serves: start from one the world
	// has recorded RoutingReady=True, not only one a poll saw True. The
	// scenario before (5f) ends on a poll, which can see the True before the
	// watch delivers it, or see a True Crossplane replayed from its cache
	// (crossplane/crossplane#7062) while the recorded verdict is still False.
	sc.eventually(t, waitSettle, "the serving ModelRoute recorded RoutingReady=True", func(ctx context.Context) string {
		sc.w.awaitReplays(ctx, time.Now())
		if st := statusAt(sc.w.routeTransitions(teamControlNS, routeName), time.Now()); st != "True" {
			return fmt.Sprintf("recorded RoutingReady=%q", st)
		}
		return wantCondition(sc.routeXR(ctx), route.ConditionType, "True")
	})
	s.up.aigw.stop(10 * time.Second)
	stopped := time.Now()
	running := false
	defer func() {
		if !running {
			c.startAIGateway(sc.ctx, s.up, s.up.aigwImage)
		}
	}()
	c.apply(sc.ctx, plainRoute(downRoute, "down."+teamControlNS+".svc.cluster.local"))

	// The function composes the route once its Backend and
	// AIServiceBackend exist, and provider-kubernetes creates it; no one
	// writes its status.
	sc.eventually(t, waitRoute, "the new ModelRoute's AIGatewayRoute on the gateway cluster, without status", func(ctx context.Context) string {
		o := sc.composedObject(ctx, teamControlNS, downRoute, "route")
		if o == nil || conditionStatus(o, "Synced") != "True" {
			return "the route Object is not created and Synced yet"
		}
		return ""
	})
	// Long enough for AI Gateway, were it running, to accept the route
	// and Envoy Gateway to translate it, and for the function to look
	// again at its TTL.
	hold := time.Now().Add(30 * time.Second)
	sc.eventually(t, time.Minute, "30 s of the new ModelRoute waiting for AI Gateway", func(ctx context.Context) string {
		u, err := sc.get(ctx, gvrModelRoute, teamControlNS, downRoute)
		if err != nil {
			return err.Error()
		}
		if st := conditionStatus(u, route.ConditionType); st == "True" {
			t.Fatalf("RoutingReady=True %s after AI Gateway stopped, which never saw the route", time.Since(stopped).Round(time.Second))
		}
		if r := conditionReason(u, route.ConditionType); r != route.ReasonWaitingForRoute {
			return fmt.Sprintf("RoutingReady reason %q (%v), want %s", r, condition(u, route.ConditionType)["message"], route.ReasonWaitingForRoute)
		}
		if msg := fmt.Sprint(condition(u, route.ConditionType)["message"]); !strings.Contains(msg, "AI Gateway's controller runs") {
			return fmt.Sprintf("RoutingReady message %q does not say to look at AI Gateway's controller", msg)
		}
		if time.Now().Before(hold) {
			return "holding"
		}
		return ""
	})
	u, _ := sc.get(sc.ctx, gvrModelRoute, teamControlNS, downRoute)
	t.Logf("scenario 5g: with AI Gateway stopped, the new ModelRoute says RoutingReady=False (%s): %v",
		conditionReason(u, route.ConditionType), condition(u, route.ConditionType)["message"])
	sc.readXDS(t, "scenario-5g-down", func(d xdsDump) string {
		if r, _ := d.modelRoute(serving); r == nil {
			return fmt.Sprintf("the serving model %q has no route", serving)
		}
		if r, _ := d.modelRoute(model); r != nil {
			t.Fatalf("Envoy is told to route %q while AI Gateway is stopped: %v", model, r)
		}
		return ""
	})

	c.startAIGateway(sc.ctx, s.up, s.up.aigwImage)
	running = true
	started := time.Now()
	sc.eventually(t, waitRoute, "the new ModelRoute RoutingReady=True once AI Gateway runs again", func(ctx context.Context) string {
		u, err := sc.get(ctx, gvrModelRoute, teamControlNS, downRoute)
		if err != nil {
			return err.Error()
		}
		return wantCondition(u, route.ConditionType, "True")
	})
	t.Logf("scenario 5g: RoutingReady=True %s after AI Gateway started again", time.Since(started).Round(100*time.Millisecond))
	// The serving route, by every change the world recorded, not only by
	// the polls above: a False between two polls would be an outage of a
	// model that AI Gateway's absence does not touch.
	if msg := trueThroughout(sc.w.routeTransitions(teamControlNS, routeName), stopped, started); msg != "" {
		t.Errorf("the serving ModelRoute %s did not stay RoutingReady=True while AI Gateway was stopped: %s", serving, msg)
	}
	if ts := since(sc.w.routeTransitions(teamControlNS, routeName), stopped); len(ts) > 0 {
		t.Logf("scenario 5g: the serving ModelRoute's RoutingReady transitions from AI Gateway's stop until the new route routed:\n%s", formatTransitions(stopped, ts))
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

// plainRoute is a ModelRoute of one in-cluster backend at hostname,
// without a key.
func plainRoute(name, hostname string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelRoute",
		"metadata": map[string]any{"name": name, "namespace": teamControlNS},
		"spec": map[string]any{
			"gatewayName": gatewayXRName,
			"backends": []any{map[string]any{
				"name":     "local",
				"endpoint": map[string]any{"hostname": hostname, "port": int64(8000), "tls": false},
				"schema":   map[string]any{"name": "OpenAI"},
			}},
		},
	}}
}

// allowRouteDeletion permits, by name, the deletions a ModelRoute's own
// deletion brings: the ModelRoute, its Objects, and its route, generated
// HTTPRoute and plainRoute's backend on the gateway cluster, so that
// nothing of another route may go.
func (sc *scenarios) allowRouteDeletion(t *testing.T, name, why string) {
	t.Helper()
	allow := []allowance{{reason: why, resource: "modelroutes", namespace: teamControlNS, name: name}}
	objs, err := sc.c.dyn.Resource(gvrObject).Namespace(teamControlNS).List(sc.ctx, metav1.ListOptions{LabelSelector: labelComposite + "=" + name})
	must(t, err)
	for _, o := range objs.Items {
		allow = append(allow, allowance{reason: why + ": its Objects go with it", resource: "objects", namespace: teamControlNS, name: o.GetName()})
	}
	for _, r := range []struct{ resource, name string }{
		{"aigatewayroutes", name}, {"httproutes", name},
		{"backends", names.BackendObject(name, "local")}, {"aiservicebackends", names.BackendObject(name, "local")},
	} {
		allow = append(allow, allowance{reason: why + ": its objects on the gateway cluster go with it", resource: r.resource, namespace: sc.w.teamNS, name: r.name})
	}
	for _, a := range allow {
		sc.w.allow(a)
	}
}

// objectsLeft returns "" when left, the Objects of a deleted composite
// still there, is empty, and otherwise says which are left and why. An
// Object waits for its object on the gateway cluster to go; one AI
// Gateway's lost finalizer removal holds gets the operator's workaround
// (releaseLostFinalizers), anything else still fails the wait. A stuck
// finalizer reads differently from a slow garbage collector.
func (sc *scenarios) objectsLeft(ctx context.Context, t *testing.T, left []unstructured.Unstructured) string {
	t.Helper()
	if len(left) == 0 {
		return ""
	}
	remote := sc.releaseLostFinalizers(ctx, t, left)
	says := make([]string, 0, len(left))
	for _, o := range left {
		syn := condition(&o, "Synced")
		says = append(says, fmt.Sprintf("%s (%s; deleting since %v; finalizers %v; Synced %v: %v; %s)", o.GetName(),
			o.GetAnnotations()[annotationResourceName], o.GetDeletionTimestamp(), o.GetFinalizers(), syn["status"], syn["message"],
			remote[o.GetName()]))
	}
	return fmt.Sprintf("%d Objects left in %s: %s", len(left), teamControlNS, strings.Join(says, "; "))
}

// deleteRoute deletes the ModelRoute name and waits until it, its Objects
// and its route on the gateway cluster are gone. Waiting only for the
// ModelRoute is not enough: Crossplane deletes a composite without waiting
// for what it composed (its Objects go by the garbage collector, then by
// the provider), and a later scenario's xDS would still find the route, its
// backends gone. An Object held by AI Gateway's lost finalizer removal gets
// the operator's workaround (aigwfinalizer_test.go), as in scenario 6.
func (sc *scenarios) deleteRoute(t *testing.T, name, why string) {
	t.Helper()
	sc.allowRouteDeletion(t, name, why)
	start := time.Now()
	must(t, sc.c.dyn.Resource(gvrModelRoute).Namespace(teamControlNS).Delete(sc.ctx, name, metav1.DeleteOptions{}))
	sc.eventually(t, waitRoute, "the ModelRoute "+name+", its Objects and its route on the gateway cluster gone", func(ctx context.Context) string {
		if _, err := sc.get(ctx, gvrModelRoute, teamControlNS, name); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("still there (%v)", err)
		}
		l, err := sc.c.dyn.Resource(gvrObject).Namespace(teamControlNS).List(ctx, metav1.ListOptions{LabelSelector: labelComposite + "=" + name})
		if err != nil {
			return err.Error()
		}
		if m := sc.objectsLeft(ctx, t, l.Items); m != "" {
			return m
		}
		for _, gvr := range []schema.GroupVersionResource{gvrAIRoute, gvrHTTPRoute} {
			if _, err := sc.get(ctx, gvr, sc.w.teamNS, name); !apierrors.IsNotFound(err) {
				return fmt.Sprintf("its %s %s/%s is still there (%v)", gvr.Resource, sc.w.teamNS, name, err)
			}
		}
		return ""
	})
	t.Logf("the ModelRoute %s, its Objects and its route on the gateway cluster were gone %s after its deletion", name, time.Since(start).Round(time.Millisecond))
}
