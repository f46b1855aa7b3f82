package controlplane

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// modelRouteDeleted is scenario 6: the ModelRoute goes. Its Objects and
// what they made on the gateway cluster are garbage-collected; the team
// namespace (managed without Delete) and the gateway's anchor route stay,
// and the gateway stays ready.
func (sc *scenarios) modelRouteDeleted(t *testing.T) {
	c, w := sc.c, sc.w
	for _, a := range []harness.Allowance{
		{Reason: "the ModelRoute is deleted", Resource: "modelroutes", Namespace: harness.TeamControlNS, Name: harness.RouteName},
		{Reason: "its Objects are garbage-collected", Resource: "objects", Namespace: harness.TeamControlNS},
		{Reason: "its route is deleted", Resource: "aigatewayroutes", Namespace: w.TeamNS},
		{Reason: "its HTTPRoute is garbage-collected with the route that owns it", Resource: "httproutes", Namespace: w.TeamNS},
		{Reason: "its backends are deleted", Resource: "backends", Namespace: w.TeamNS},
		{Reason: "its AI backends are deleted", Resource: "aiservicebackends", Namespace: w.TeamNS},
		{Reason: "its credential policies are deleted", Resource: "backendsecuritypolicies", Namespace: w.TeamNS},
		{Reason: "its credentials are deleted", Resource: "secrets", Namespace: w.TeamNS},
	} {
		w.Allow(a)
	}
	start, lostBefore := time.Now(), sc.lostFinalizers
	harness.Must(t, c.Dyn.Resource(harness.GVRModelRoute).Namespace(harness.TeamControlNS).Delete(sc.ctx, harness.RouteName, metav1.DeleteOptions{}))
	sc.eventually(t, waitRoute, "the ModelRoute, its Objects and its objects on the gateway cluster to be gone", func(ctx context.Context) string {
		if sc.routeXR(ctx) != nil {
			return "the ModelRoute is still there"
		}
		l, err := c.Dyn.Resource(harness.GVRObject).Namespace(harness.TeamControlNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		if m := sc.objectsLeft(ctx, t, l.Items); m != "" {
			return m
		}
		for _, gvr := range []schema.GroupVersionResource{harness.GVRAIRoute, harness.GVRHTTPRoute, harness.GVRBackend, harness.GVRAIBackend, harness.GVRSecPolicy} {
			l, err := c.Dyn.Resource(gvr).Namespace(w.TeamNS).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err.Error()
			}
			if len(l.Items) > 0 {
				return fmt.Sprintf("%d %s left in %s", len(l.Items), gvr.Resource, w.TeamNS)
			}
		}
		if _, err := sc.get(ctx, harness.GVRSecret, w.TeamNS, names.BackendObject(harness.RouteName, harness.KeyedBackend)); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("the credential Secret is still there (%v)", err)
		}
		return ""
	})
	t.Logf("the ModelRoute and everything it composed were gone %s after its deletion; AI Gateway finalizers removed by hand (%s): %d",
		time.Since(start).Round(time.Millisecond), upstreamFinalizerIssue, sc.lostFinalizers-lostBefore)
	sc.sp.Record("scenario-6", evLostFinalizers, float64(sc.lostFinalizers-lostBefore))

	ns, err := sc.get(sc.ctx, harness.GVRNamespace, "", w.TeamNS)
	switch {
	case err != nil:
		t.Errorf("the team namespace %s: %v", w.TeamNS, err)
	case ns.GetDeletionTimestamp() != nil:
		t.Errorf("the team namespace %s is being deleted", w.TeamNS)
	}
	if _, err := sc.get(sc.ctx, harness.GVRAIRoute, harness.GatewayNS, names.AnchorRoute(harness.GatewayXRName)); err != nil {
		t.Errorf("the gateway's anchor route: %v", err)
	}
	if st := harness.ConditionStatus(sc.gatewayXR(sc.ctx), gateway.ConditionType); st != "True" {
		t.Errorf("GatewayReady=%s after the ModelRoute was deleted, want True", st)
	}
	sc.agree(t)
	sc.noDeletions(t)
	for _, d := range w.Deleted() {
		t.Logf("deleted %.2fs after the ModelRoute: %s %s/%s (%s)", d.At.Sub(start).Seconds(), d.Resource, d.Namespace, d.Name, d.AllowedReason)
	}
	w.Check(t)
}
