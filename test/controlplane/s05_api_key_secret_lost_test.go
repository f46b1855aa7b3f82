package controlplane

import (
	"context"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// secretLostAndRestored is scenario 5: the openrouter backend's API-key
// Secret is deleted and later restored. The backend must leave the route's
// backendRefs and come back, and nothing composed may be deleted
// meanwhile: the function carries the backend's objects forward.
func (sc *scenarios) secretLostAndRestored(t *testing.T) {
	c, w := sc.c, sc.w
	ref := names.BackendObject(harness.RouteName, harness.KeyedBackend)
	secret, err := sc.get(sc.ctx, harness.GVRSecret, harness.TeamControlNS, harness.APIKeySecret)
	harness.Must(t, err)

	w.Allow(harness.Allowance{Reason: "scenario 5 deletes the API-key Secret", Resource: "secrets", Namespace: harness.TeamControlNS, Name: harness.APIKeySecret})
	harness.Must(t, c.Dyn.Resource(harness.GVRSecret).Namespace(harness.TeamControlNS).Delete(sc.ctx, harness.APIKeySecret, metav1.DeleteOptions{}))
	sc.eventually(t, waitRoute, "the openrouter backend to leave the route's backendRefs", func(ctx context.Context) string {
		return sc.backendRef(ctx, ref, false)
	})
	mr := sc.routeXR(sc.ctx)
	bs, _, _ := unstructured.NestedMap(mr.Object, "status", "backends")
	t.Logf("without the Secret: RoutingReady=%s (%s), status.backends %v", harness.ConditionStatus(mr, "RoutingReady"),
		harness.ConditionReason(mr, "RoutingReady"), bs)
	sc.backendObjectsExist(t, ref)
	sc.noSecretsInObjects(t, "without the API-key Secret")

	fresh := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": secret.GetName(), "namespace": secret.GetNamespace()},
		"type":     secret.Object["type"], "data": secret.Object["data"],
	}}
	_, err = c.Dyn.Resource(harness.GVRSecret).Namespace(harness.TeamControlNS).Create(sc.ctx, fresh, metav1.CreateOptions{})
	harness.Must(t, err)
	sc.eventually(t, waitRoute, "the openrouter backend back in the route's backendRefs", func(ctx context.Context) string {
		return sc.backendRef(ctx, ref, true)
	})
	sc.backendObjectsExist(t, ref)
	sc.eventually(t, waitRoute, "RoutingReady=True", func(ctx context.Context) string {
		return wantCondition(sc.routeXR(ctx), "RoutingReady", "True")
	})
	sc.envoyIsTold(t)
	key := sc.controlPlaneKey(t)
	sc.eventually(t, waitRoute, "the restored API key in the gateway cluster's Secret", func(ctx context.Context) string {
		return sc.gatewayKeyIs(ctx, key)
	})
	sc.noSecretsInObjects(t, "after the API-key Secret was restored")
	sc.noDeletions(t)
	w.Check(t)
}

// backendRef returns "" when the model's AIGatewayRoute on the gateway
// cluster refers to the AIServiceBackend name exactly when want says so.
func (sc *scenarios) backendRef(ctx context.Context, name string, want bool) string {
	r, err := sc.get(ctx, harness.GVRAIRoute, sc.w.TeamNS, harness.RouteName)
	if err != nil {
		return err.Error()
	}
	var refs []string
	rules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
	for _, x := range rules {
		rule, _ := x.(map[string]any)
		brs, _ := rule["backendRefs"].([]any)
		for _, y := range brs {
			br, _ := y.(map[string]any)
			if n, _ := br["name"].(string); n != "" {
				refs = append(refs, n)
			}
		}
	}
	if slices.Contains(refs, name) != want {
		return fmt.Sprintf("backendRefs %v", refs)
	}
	return ""
}
