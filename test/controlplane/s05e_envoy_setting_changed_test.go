package controlplane

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// envoySettingChanged is scenario 5e: spec.envoy.drainTimeout changes on
// the live gateway. The EnvoyProxy changes, Envoy Gateway changes the pod
// template (a termination grace period of the drain timeout plus 300 s:
// gateway v1.8.3 internal/infrastructure/kubernetes/proxy/
// resource_provider.go, expectedTerminationGracePeriodSeconds), and the Deployment rolls: GatewayReady is
// False while old-template pods serve and True after, the model's route
// stays composed throughout, and RoutingReady comes back.
func (sc *scenarios) envoySettingChanged(t *testing.T) {
	s := sc.s
	gen := sc.envoyDeployment(sc.ctx).GetGeneration()
	s.Kubelet.SetHold(true)
	patch := fmt.Sprintf(`{"spec":{"envoy":{"drainTimeout":%q}}}`, drainTimeoutChanged)
	if _, err := sc.c.Dyn.Resource(harness.GVRInferenceGW).Patch(sc.ctx, harness.GatewayXRName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("cannot change spec.envoy.drainTimeout: %v", err)
	}
	sc.eventually(t, waitSettle, "the EnvoyProxy's new drain timeout and old-template pods", func(ctx context.Context) string {
		ep, err := sc.get(ctx, harness.GVREnvoyProxy, harness.GatewayNS, harness.GatewayXRName)
		if err != nil {
			return err.Error()
		}
		if d, _, _ := unstructured.NestedString(ep.Object, "spec", "shutdown", "drainTimeout"); d != drainTimeoutChanged {
			return "EnvoyProxy drainTimeout " + d
		}
		return sc.oldTemplatePodsCounted(ctx, gen)
	})
	if st := sc.agree(t); st != "False" {
		t.Fatalf("GatewayReady=%s while the Deployment controller counts old-template pods", st)
	}
	sc.routeComposed(t)
	s.Kubelet.SetHold(false)
	sc.eventually(t, waitSettle, "GatewayReady=True", func(ctx context.Context) string {
		return wantCondition(sc.gatewayXR(ctx), gateway.ConditionType, "True")
	})
	if st := sc.agree(t); st != "True" {
		t.Errorf("settled GatewayReady=%s after the rollout, want True", st)
	}
	if g, _, _ := unstructured.NestedInt64(sc.envoyDeployment(sc.ctx).Object, "spec", "template", "spec", "terminationGracePeriodSeconds"); g != 420 {
		t.Errorf("the template's terminationGracePeriodSeconds is %d, want 120 + 300", g)
	}
	sc.routeComposed(t)
	sc.eventually(t, waitRoute, "RoutingReady=True again", func(ctx context.Context) string {
		return wantCondition(sc.routeXR(ctx), "RoutingReady", "True")
	})
	sc.noDeletions(t)
	sc.w.Check(t)
}

// routeComposed fails the test unless the model's AIGatewayRoute and its
// Object are there.
func (sc *scenarios) routeComposed(t *testing.T) {
	t.Helper()
	if _, err := sc.get(sc.ctx, harness.GVRAIRoute, sc.w.TeamNS, harness.RouteName); err != nil {
		t.Errorf("the model's AIGatewayRoute: %v", err)
	}
	if sc.composedObject(sc.ctx, harness.TeamControlNS, harness.RouteName, "route") == nil {
		t.Errorf("the model's route Object is gone")
	}
}
