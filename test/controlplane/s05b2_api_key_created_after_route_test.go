package controlplane

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/route"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// The ModelRoute of scenario 5b2 and its API-key Secret.
const (
	lateRoute  = "late-key"
	lateSecret = "late-key"
)

// keyCreatedAfterRoute is scenario 5b2 (issue 33): a ModelRoute whose only
// backend's API-key Secret does not exist yet. It is composed, and
// RoutingReady=False, while provider-kubernetes cannot resolve its
// sources Object's reference (Synced=False). Once the team creates the
// Secret, the route must be RoutingReady=True with the key on the gateway
// cluster within waitRotation. The route's own look cannot be what brings
// it: the route backs off with its spell (compose.RestingBackoff), so the
// suite also asserts the mechanism, the sources ConfigMap on the gateway
// cluster carrying the new Secret's resourceVersion, which only the
// provider's watch of the Secret writes.
func (sc *scenarios) keyCreatedAfterRoute(t *testing.T) {
	c, w := sc.c, sc.w
	r := plainRoute(lateRoute, "")
	r.Object["spec"].(map[string]any)["backends"] = []any{hostedKeyedBackend(lateSecret)}
	c.Apply(sc.ctx, r)
	var before string
	sc.eventually(t, waitRoute, "the ModelRoute "+lateRoute+" RoutingReady=False, and its sources Object unable to resolve the missing Secret (Synced=False)", func(ctx context.Context) string {
		mr, err := sc.get(ctx, harness.GVRModelRoute, harness.TeamControlNS, lateRoute)
		if err != nil {
			return err.Error()
		}
		if msg := wantCondition(mr, "RoutingReady", "False"); msg != "" {
			return msg
		}
		before = harness.ConditionReason(mr, "RoutingReady")
		o := sc.composedObject(ctx, harness.TeamControlNS, lateRoute, route.ResourceSources)
		if o == nil {
			return "no sources Object composed yet"
		}
		if s := harness.ConditionStatus(o, "Synced"); s != "False" {
			return "its sources Object is Synced=" + s + ", want False while the Secret is missing"
		}
		return ""
	})
	t.Logf("without its Secret: RoutingReady=False (%s)", before)

	key := base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("sk-late-%d", time.Now().UnixNano())))
	w.Forbid("the late route's API key", key)
	start := time.Now()
	created, err := c.Dyn.Resource(harness.GVRSecret).Namespace(harness.TeamControlNS).Create(sc.ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": lateSecret, "namespace": harness.TeamControlNS},
		"type":     "Opaque", "data": map[string]any{harness.APIKeyField: key},
	}}, metav1.CreateOptions{})
	harness.Must(t, err)
	deadline := start.Add(waitRotation)
	cm := names.Child(lateRoute, "sources")
	sc.eventually(t, time.Until(deadline), "the gateway cluster's sources ConfigMap "+cm+" carrying the new Secret's resourceVersion", func(ctx context.Context) string {
		o, err := sc.get(ctx, harness.GVRConfigMap, w.TeamNS, cm)
		if err != nil {
			return err.Error()
		}
		got, _, _ := unstructured.NestedString(o.Object, "data", "secret."+lateSecret)
		if got != created.GetResourceVersion() {
			return fmt.Sprintf("data[secret.%s] is %q, want %q", lateSecret, got, created.GetResourceVersion())
		}
		return ""
	})
	followed := time.Since(start)
	sc.eventually(t, time.Until(deadline), "the ModelRoute "+lateRoute+" RoutingReady=True with its key on the gateway cluster", func(ctx context.Context) string {
		if msg := sc.routeKeyIs(ctx, lateRoute, hostedBackend, key); msg != "" {
			return msg
		}
		mr, err := sc.get(ctx, harness.GVRModelRoute, harness.TeamControlNS, lateRoute)
		if err != nil {
			return err.Error()
		}
		return wantCondition(mr, "RoutingReady", "True")
	})
	routed := time.Since(start)
	t.Logf("after the Secret was created: the sources ConfigMap followed in %s, the route was RoutingReady=True with its key in %s",
		followed.Round(time.Millisecond), routed.Round(time.Millisecond))
	sc.sp.Record("key-created-after-route", "sources-followed-secret", seconds(followed))
	sc.sp.Record("key-created-after-route", "routing-ready-after-secret-created", seconds(routed))
	sc.noSecretsInObjects(t, "after the late API key arrived")

	for _, a := range []harness.Allowance{
		{Reason: "scenario 5b2 deletes its route's API-key Secret", Resource: "secrets", Namespace: harness.TeamControlNS, Name: lateSecret},
		{Reason: "scenario 5b2 deletes its ModelRoute: its key's copy goes with it", Resource: "secrets", Namespace: w.TeamNS, Name: names.BackendObject(lateRoute, hostedBackend)},
		{Reason: "scenario 5b2 deletes its ModelRoute: its credential policy goes with it", Resource: "backendsecuritypolicies", Namespace: w.TeamNS, Name: names.BackendObject(lateRoute, hostedBackend)},
		{Reason: "scenario 5b2 deletes its ModelRoute: its backend goes with it", Resource: "backends", Namespace: w.TeamNS, Name: names.BackendObject(lateRoute, hostedBackend)},
		{Reason: "scenario 5b2 deletes its ModelRoute: its AI backend goes with it", Resource: "aiservicebackends", Namespace: w.TeamNS, Name: names.BackendObject(lateRoute, hostedBackend)},
	} {
		w.Allow(a)
	}
	sc.deleteRoute(t, lateRoute, "scenario 5b2 deletes its ModelRoute")
	harness.Must(t, c.Dyn.Resource(harness.GVRSecret).Namespace(harness.TeamControlNS).Delete(sc.ctx, lateSecret, metav1.DeleteOptions{}))
	sc.noDeletions(t)
	w.Check(t)
}
