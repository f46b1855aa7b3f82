package controlplane

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/route"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// Scenario 5j: one model through every gateway it selects, on two API
// servers. The suite's API server is the first gateway cluster; a second
// one joins as the ClusterProviderConfig fleetCluster, with a second
// InferenceGateway on it. No Envoy Gateway or AI Gateway runs against the
// second, so its gateway is never GatewayReady: the scenario shows where
// and what the fleet route composes, and how it follows its selection.
const (
	fleetCluster   = "gpu-cluster-2"
	fleetGatewayXR = "inference-gateway-2"
	fleetRouteName = "fleet-model"
	fleetLabel     = "region"
)

// fleetRoute is scenario 5j.
func (sc *scenarios) fleetRoute(t *testing.T) {
	c, w := sc.c, sc.w
	c2 := c.StartGatewayCluster(sc.ctx, t, fleetCluster)

	sc.labelGateway(t, harness.GatewayXRName, "eu")
	t.Cleanup(func() { sc.labelGateway(t, harness.GatewayXRName, "") })
	gw2 := c.ReadYAMLFile(harness.GatewayXRFile)[0]
	gw2.SetName(fleetGatewayXR)
	gw2.SetLabels(map[string]string{fleetLabel: "eu"})
	harness.Must(t, unstructured.SetNestedField(gw2.Object, fleetCluster, "spec", "providerConfigName"))
	c.Create(sc.ctx, harness.GVRInferenceGW, gw2)

	r := plainRoute(fleetRouteName, "fleet."+harness.TeamControlNS+".svc.cluster.local")
	spec := r.Object["spec"].(map[string]any)
	delete(spec, "gatewayName")
	spec["gatewaySelector"] = map[string]any{"matchLabels": map[string]any{fleetLabel: "eu"}}
	created := time.Now()
	c.Apply(sc.ctx, r)

	// The model's objects on both API servers, alike; RoutingReady False
	// naming the second gateway, which is not ready; the first routes.
	objects := []schema.GroupVersionResource{harness.GVRAIRoute, harness.GVRBackend, harness.GVRAIBackend}
	objectName := map[schema.GroupVersionResource]string{
		harness.GVRAIRoute: fleetRouteName, harness.GVRBackend: names.BackendObject(fleetRouteName, "local"), harness.GVRAIBackend: names.BackendObject(fleetRouteName, "local"),
	}
	sc.eventually(t, waitRoute, "the fleet route's objects on both API servers, and RoutingReady naming the second gateway", func(ctx context.Context) string {
		for _, gvr := range objects {
			one, err := c.Dyn.Resource(gvr).Namespace(w.TeamNS).Get(ctx, objectName[gvr], metav1.GetOptions{})
			if err != nil {
				return fmt.Sprintf("the first API server: %v", err)
			}
			two, err := c2.Dyn.Resource(gvr).Namespace(w.TeamNS).Get(ctx, objectName[gvr], metav1.GetOptions{})
			if err != nil {
				return fmt.Sprintf("the second API server: %v", err)
			}
			if d := cmp.Diff(one.Object["spec"], two.Object["spec"]); d != "" {
				return fmt.Sprintf("%s %s differs between the API servers (-first +second):\n%s", gvr.Resource, objectName[gvr], d)
			}
		}
		return fleetStatus(sc.fleetXR(ctx), "False", route.ReasonWaitingForGateways, "1/2", map[string]bool{harness.GatewayXRName: true, fleetGatewayXR: false})
	})
	t.Logf("scenario 5j: the fleet route's objects on both API servers, alike, and RoutingReady=False (%s) naming %s, %s after its creation",
		route.ReasonWaitingForGateways, fleetGatewayXR, time.Since(created).Round(time.Second))
	first := sc.fleetObjects(t, objects, objectName)

	// Relabelled away: the second cluster loses the model, the first
	// keeps its objects as they are. Crossplane strips a composed
	// resource's labels before it deletes it (crossplane v2.3.0
	// internal/controller/apiextensions/composite/composition_functions.go,
	// GarbageCollectComposedResources), so the Objects are known by their
	// composition resource names.
	w.Allow(harness.Allowance{Reason: "scenario 5j relabels the second gateway out of the fleet route's selection", Resource: "objects",
		Namespace: harness.TeamControlNS, ResourceNamePrefix: fleetGatewayXR + "/"})
	relabelled := time.Now()
	sc.labelGateway(t, fleetGatewayXR, "us")
	sc.eventually(t, waitRoute, "the fleet route's objects gone from the second API server, and RoutingReady True", func(ctx context.Context) string {
		for _, gvr := range objects {
			if _, err := c2.Dyn.Resource(gvr).Namespace(w.TeamNS).Get(ctx, objectName[gvr], metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Sprintf("%s %s on the second API server: %v", gvr.Resource, objectName[gvr], err)
			}
		}
		return fleetStatus(sc.fleetXR(ctx), "True", route.ReasonAccepted, "1/1", map[string]bool{harness.GatewayXRName: true})
	})
	gone := time.Since(relabelled)
	t.Logf("scenario 5j: the second gateway relabelled away; the model left its API server %s later", gone.Round(time.Second))
	sc.sp.Record("scenario-5j", "relabelled-away-to-gone-seconds", gone.Seconds())
	if after := sc.fleetObjects(t, objects, objectName); !cmp.Equal(first, after) {
		t.Errorf("the first API server's objects changed while the second gateway left the selection (uid/generation before %v, after %v)", first, after)
	}

	// Labelled again: the model comes back without any change to the
	// ModelRoute, within the fleet route's requeue (route.FleetRequeue).
	before := fleetSpec(sc.fleetXR(sc.ctx))
	labelled := time.Now()
	sc.labelGateway(t, fleetGatewayXR, "eu")
	sc.eventually(t, waitRoute, "the fleet route's objects back on the second API server", func(ctx context.Context) string {
		for _, gvr := range objects {
			if _, err := c2.Dyn.Resource(gvr).Namespace(w.TeamNS).Get(ctx, objectName[gvr], metav1.GetOptions{}); err != nil {
				return fmt.Sprintf("%s %s on the second API server: %v", gvr.Resource, objectName[gvr], err)
			}
		}
		return fleetStatus(sc.fleetXR(ctx), "False", route.ReasonWaitingForGateways, "1/2", map[string]bool{harness.GatewayXRName: true, fleetGatewayXR: false})
	})
	joined := time.Since(labelled)
	t.Logf("scenario 5j: the second gateway labelled again; the model reached its API server %s later (the fleet route looks again at least every %s)", joined.Round(time.Second), route.FleetRequeue)
	sc.sp.Record("scenario-5j", "labelled-to-composed-seconds", joined.Seconds())
	if d := cmp.Diff(before, fleetSpec(sc.fleetXR(sc.ctx))); d != "" {
		t.Errorf("the ModelRoute's spec changed (-before +after):\n%s", d)
	}
	if after := sc.fleetObjects(t, objects, objectName); !cmp.Equal(first, after) {
		t.Errorf("the first API server's objects changed while the second gateway joined (uid/generation before %v, after %v)", first, after)
	}

	// Leave as found: the fleet route gone from both, the second gateway
	// and its Objects gone while its API server still runs.
	sc.deleteRoute(t, fleetRouteName, "scenario 5j deletes the fleet route")
	for _, gvr := range objects {
		if _, err := c2.Dyn.Resource(gvr).Namespace(w.TeamNS).Get(sc.ctx, objectName[gvr], metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s %s on the second API server after the fleet route's deletion: %v", gvr.Resource, objectName[gvr], err)
		}
	}
	sc.deleteGateway(t, fleetGatewayXR, "scenario 5j deletes the second gateway")
}

// fleetXR is the fleet ModelRoute, or nil.
func (sc *scenarios) fleetXR(ctx context.Context) *unstructured.Unstructured {
	u, err := sc.get(ctx, harness.GVRModelRoute, harness.TeamControlNS, fleetRouteName)
	if err != nil {
		return nil
	}
	return u
}

// fleetStatus says how the fleet route u differs from RoutingReady status
// and reason, status.routed and, by gateway, whether each routes; "" when
// it does not.
func fleetStatus(u *unstructured.Unstructured, status, reason, routed string, routes map[string]bool) string {
	if u == nil {
		return "the fleet ModelRoute is not there"
	}
	if st, rs := harness.ConditionStatus(u, route.ConditionType), harness.ConditionReason(u, route.ConditionType); st != status || rs != reason {
		return fmt.Sprintf("RoutingReady=%s (%s), want %s (%s): %v", st, rs, status, reason, harness.Condition(u, route.ConditionType)["message"])
	}
	msg := fmt.Sprint(harness.Condition(u, route.ConditionType)["message"])
	for gw, ok := range routes {
		if !ok && !strings.Contains(msg, gw+" (") {
			return fmt.Sprintf("RoutingReady's message does not name %s: %s", gw, msg)
		}
	}
	if got, _, _ := unstructured.NestedString(u.Object, "status", "routed"); got != routed {
		return fmt.Sprintf("status.routed %q, want %q", got, routed)
	}
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "gateways")
	got := map[string]bool{}
	for _, e := range list {
		m, _ := e.(map[string]any)
		n, _ := m["name"].(string)
		got[n], _ = m["routes"].(bool)
	}
	if d := cmp.Diff(routes, got); d != "" {
		return fmt.Sprintf("status.gateways[].routes by name (-want +got):\n%s", d)
	}
	return ""
}

// fleetSpec is the ModelRoute u's spec but spec.crossplane, which
// Crossplane writes (the composed resources' references change as the
// selection does): what the user wrote.
func fleetSpec(u *unstructured.Unstructured) map[string]any {
	if u == nil {
		return nil
	}
	spec, _ := u.Object["spec"].(map[string]any)
	out := maps.Clone(spec)
	delete(out, "crossplane")
	return out
}

// fleetObjects are the uid and generation of the fleet route's objects on
// the first API server: what a change of them, or their deletion and
// creation again, changes.
func (sc *scenarios) fleetObjects(t *testing.T, gvrs []schema.GroupVersionResource, name map[schema.GroupVersionResource]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, gvr := range gvrs {
		u, err := sc.get(sc.ctx, gvr, sc.w.TeamNS, name[gvr])
		if err != nil {
			t.Fatalf("the fleet route's %s %s on the first API server: %v", gvr.Resource, name[gvr], err)
		}
		out[gvr.Resource] = fmt.Sprintf("%s/%d", u.GetUID(), u.GetGeneration())
	}
	return out
}

// labelGateway sets the InferenceGateway name's fleetLabel to value, or
// removes it when value is "".
func (sc *scenarios) labelGateway(t *testing.T, name, value string) {
	t.Helper()
	v := "null"
	if value != "" {
		v = fmt.Sprintf("%q", value)
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, fleetLabel, v)
	if _, err := sc.c.Dyn.Resource(harness.GVRInferenceGW).Patch(sc.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Errorf("cannot label the InferenceGateway %s %s=%s: %v", name, fleetLabel, value, err)
	}
}

// deleteGateway deletes the InferenceGateway name, which must compose on
// another cluster than the suite's, and waits until its Objects are gone.
func (sc *scenarios) deleteGateway(t *testing.T, name, why string) {
	t.Helper()
	sc.w.Allow(harness.Allowance{Reason: why, Resource: "inferencegateways", Name: name})
	sc.w.Allow(harness.Allowance{Reason: why, Resource: "objects", Namespace: harness.ObjectNS, Composite: name})
	harness.Must(t, sc.c.Dyn.Resource(harness.GVRInferenceGW).Delete(sc.ctx, name, metav1.DeleteOptions{}))
	sc.eventually(t, waitRoute, "the InferenceGateway "+name+" and its Objects gone", func(ctx context.Context) string {
		if _, err := sc.get(ctx, harness.GVRInferenceGW, "", name); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("still there (%v)", err)
		}
		l, err := sc.c.Dyn.Resource(harness.GVRObject).Namespace(harness.ObjectNS).List(ctx, metav1.ListOptions{LabelSelector: harness.LabelComposite + "=" + name})
		if err != nil {
			return err.Error()
		}
		if len(l.Items) > 0 {
			return fmt.Sprintf("%d Objects left", len(l.Items))
		}
		return ""
	})
}
