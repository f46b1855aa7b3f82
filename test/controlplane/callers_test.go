package controlplane

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// The callers' Secrets of scenario 5c, on the control plane in ObjectNS,
// and the label spec.auth selects them by.
const (
	callersSecret    = "platform-callers"
	callersSecret2   = "search-callers"
	callersLabel     = "modelplane.ai/callers"
	callersLabelTrue = "true"
)

// putCallers creates or replaces a callers' Secret on the control plane.
func (sc *scenarios) putCallers(t *testing.T, name string, data map[string]any) {
	t.Helper()
	harness.Must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := sc.get(sc.ctx, harness.GVRSecret, harness.ObjectNS, name)
		if err != nil {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": data,
				"metadata": map[string]any{"name": name, "namespace": harness.ObjectNS, "labels": map[string]any{callersLabel: callersLabelTrue}},
			}}
			_, err = sc.c.Dyn.Resource(harness.GVRSecret).Namespace(harness.ObjectNS).Create(sc.ctx, u, metav1.CreateOptions{})
			return err
		}
		cur.Object["data"] = data
		_, err = sc.c.Dyn.Resource(harness.GVRSecret).Namespace(harness.ObjectNS).Update(sc.ctx, cur, metav1.UpdateOptions{})
		return err
	}))
}

// patchGateway merge-patches the InferenceGateway.
func (sc *scenarios) patchGateway(t *testing.T, patch string) {
	t.Helper()
	_, err := sc.c.Dyn.Resource(harness.GVRInferenceGW).Patch(sc.ctx, harness.GatewayXRName, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	harness.Must(t, err)
}

// copyHolds returns "" once the gateway cluster's copy of a callers'
// Secret holds exactly want. It never prints a key.
func (sc *scenarios) copyHolds(ctx context.Context, name string, want map[string]string) string {
	s, err := sc.get(ctx, harness.GVRSecret, harness.GatewayNS, name)
	if err != nil {
		return err.Error()
	}
	got, _, _ := unstructured.NestedStringMap(s.Object, "data")
	if !maps.Equal(got, want) {
		return fmt.Sprintf("the copy %s/%s holds client IDs %v, not yet the control plane's %v (or other keys)", harness.GatewayNS, name, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	return ""
}

// gatewayAuthReady returns "" when GatewayReady is True, status.auth
// counts clients, and the SecurityPolicy references exactly refs and is
// accepted by Envoy Gateway for its current generation.
func (sc *scenarios) gatewayAuthReady(ctx context.Context, refs []string, clients int64) string {
	gw := sc.gatewayXR(ctx)
	if s := wantCondition(gw, gateway.ConditionType, "True"); s != "" {
		return s + ": " + conditionMessage2(gw, gateway.ConditionType)
	}
	if n, _, _ := unstructured.NestedInt64(gw.Object, "status", "auth", "clients"); n != clients {
		return fmt.Sprintf("status.auth.clients %d, want %d", n, clients)
	}
	p, err := sc.get(ctx, harness.GVREGSecurityPolicy, harness.GatewayNS, names.CallerPolicy(harness.GatewayXRName))
	if err != nil {
		return err.Error()
	}
	var got []string
	rs, _, _ := unstructured.NestedSlice(p.Object, "spec", "apiKeyAuth", "credentialRefs")
	for _, r := range rs {
		m, _ := r.(map[string]any)
		n, _ := m["name"].(string)
		got = append(got, n)
	}
	if !slices.Equal(got, refs) {
		return fmt.Sprintf("the SecurityPolicy references %v, want %v", got, refs)
	}
	return acceptedNow(p, "SecurityPolicy")
}

// acceptedNow returns "" when Envoy Gateway has accepted the policy p for
// an ancestor at p's current generation: an Accepted=True left from an
// earlier generation says nothing of the spec now (what names the kind in
// the message).
func acceptedNow(p *unstructured.Unstructured, what string) string {
	anc, _, _ := unstructured.NestedSlice(p.Object, "status", "ancestors")
	for _, a := range anc {
		am, _ := a.(map[string]any)
		conds, _ := am["conditions"].([]any)
		for _, x := range conds {
			cm, _ := x.(map[string]any)
			if cm["type"] == "Accepted" && cm["status"] == "True" && fmt.Sprint(cm["observedGeneration"]) == strconv.FormatInt(p.GetGeneration(), 10) {
				return ""
			}
		}
	}
	return fmt.Sprintf("the %s (generation %d) is not accepted: %v", what, p.GetGeneration(), anc)
}

// conditionMessage2 is a condition's message, or "".
func conditionMessage2(u *unstructured.Unstructured, typ string) string {
	if u == nil {
		return ""
	}
	m, _ := harness.Condition(u, typ)["message"].(string)
	return m
}
