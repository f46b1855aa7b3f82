package controlplane

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// Scenario 2c's settings: none is a default, so a function that ignored
// the spec would fail every check. checkPassiveHealth reads a cluster
// without common_lb_config.healthy_panic_threshold as Envoy's own default of
// 50% (Envoy's load-balancing docs, "Panic threshold"), so a check at 50
// could not tell a threshold passed on from one left out.
const (
	tunedPanicThreshold = 30
	tunedNumRetries     = 2
	tunedBufferLimit    = "64Mi"
)

// tunedSettings is scenario 2c: spec.failover's panicThreshold and
// numRetries and spec.connection.bufferLimit set to other values than their
// defaults reach our Gateway's xDS (every listener's buffer limit, every
// model cluster's healthy panic threshold, the route's retries), and taking
// them out again brings the defaults back, which the scenarios after this
// one expect. Neither setting changes the Envoy pod template, so no
// rollout follows.
func (sc *scenarios) tunedSettings(t *testing.T) {
	t.Helper()
	xr := sc.gatewayXR(sc.ctx)
	if xr == nil {
		t.Fatal("the InferenceGateway is gone before scenario 2c")
	}
	// What each field was, or nil to remove it again.
	was := func(path ...string) any {
		v, ok, _ := unstructured.NestedFieldNoCopy(xr.Object, path...)
		if !ok {
			return nil
		}
		return v
	}
	oldThreshold, oldRetries, oldLimit := was("spec", "failover", "panicThreshold"), was("spec", "failover", "numRetries"), was("spec", "connection", "bufferLimit")
	set := func(threshold, retries, limit any) {
		t.Helper()
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{
			"failover":   map[string]any{"panicThreshold": threshold, "numRetries": retries},
			"connection": map[string]any{"bufferLimit": limit},
		}})
		harness.Must(t, err)
		if _, err := sc.c.Dyn.Resource(harness.GVRInferenceGW).Patch(sc.ctx, harness.GatewayXRName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("cannot set spec.failover and spec.connection of the InferenceGateway: %v", err)
		}
	}
	restored := false
	defer func() {
		if !restored {
			set(oldThreshold, oldRetries, oldLimit)
		}
	}()

	model := harness.TeamControlNS + "/" + harness.RouteName
	limit := resource.MustParse(tunedBufferLimit)
	set(tunedPanicThreshold, tunedNumRetries, tunedBufferLimit)
	sc.readXDS(t, "scenario-2c-tuned", all(
		checkBodyLimit(limit.Value()),
		checkFailover(model, []int64{0, 1}, []int64{429, 503}, tunedNumRetries),
		checkPassiveHealth(tunedPanicThreshold),
	))

	set(oldThreshold, oldRetries, oldLimit)
	restored = true
	sc.readXDS(t, "scenario-2c-defaults", all(
		checkBodyLimit(v1alpha1.DefaultBufferLimit.Value()),
		checkFailover(model, []int64{0, 1}, []int64{429, 503}, int64(v1alpha1.DefaultNumRetries)),
		checkPassiveHealth(v1alpha1.DefaultPanicThreshold),
	))
}
