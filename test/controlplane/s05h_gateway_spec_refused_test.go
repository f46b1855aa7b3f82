package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/route"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// bufferLimitRefused is a spec.connection.bufferLimit the XRD's pattern
// admits and the function refuses (it must be from 32Ki to 4095Mi, what
// Envoy Gateway accepts).
const bufferLimitRefused = "8Gi"

// refusedMessage is what a route says of its gateway while the gateway
// refuses its spec (route/gatewayview.go, published).
const refusedMessage = "is not GatewayReady (" + gateway.ReasonSpecRefused + ")"

// gatewaySpecRefused is scenario 5h (issue 47): a person sets
// spec.connection.bufferLimit out of range on the serving gateway. The
// function refuses the spec and keeps the gateway serving: GatewayReady
// False, reason SpecRefused, naming the field; nothing on the gateway
// cluster changes but the gateway-status ConfigMap, which says
// SpecRefused. The serving route hears of it through the ConfigMap's
// watch, not at its TTL, and says RoutingReady=False, WaitingForGateway,
// naming the gateway and the refusal (docs/conditions.md, "A refused
// spec", says why False). The time from the change to the route's False
// is recorded as route-follows-refused-gateway-s. Once the spec is fixed
// the gateway is GatewayReady again, the route follows, and nothing is
// re-created.
func (sc *scenarios) gatewaySpecRefused(t *testing.T) {
	c, w := sc.c, sc.w
	before, err := sc.gatewayState(sc.ctx)
	harness.Must(t, err)
	xr := sc.gatewayXR(sc.ctx)
	if s := wantCondition(xr, gateway.ConditionType, "True"); s != "" {
		t.Fatalf("the gateway is not serving before scenario 5h: %s", s)
	}
	// What it was, or null to remove it again.
	var good any
	if v, ok, _ := unstructured.NestedString(xr.Object, "spec", "connection", "bufferLimit"); ok {
		good = v
	}
	patchLimit := func(v any) {
		t.Helper()
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{"connection": map[string]any{"bufferLimit": v}}})
		harness.Must(t, err)
		if _, err := c.Dyn.Resource(harness.GVRInferenceGW).Patch(sc.ctx, harness.GatewayXRName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("cannot set spec.connection.bufferLimit to %v: %v", v, err)
		}
	}

	// Whether the route's breaker holds its events back decides how soon
	// it can hear: within a watch event when closed, at its TTL (30 s
	// while True, route.HeldBackRoutingRequeue) or the breaker's one event
	// in 30 s when open.
	heldBack := 0.0
	if r, err := sc.get(sc.ctx, harness.GVRModelRoute, harness.TeamControlNS, harness.RouteName); err == nil && harness.ConditionStatus(r, "Responsive") == "False" {
		heldBack = 1
	}
	start := time.Now()
	patchLimit(bufferLimitRefused)
	fixed := false
	defer func() {
		if !fixed {
			patchLimit(good)
		}
	}()
	sc.eventually(t, waitSettle, "GatewayReady=False (SpecRefused) naming spec.connection.bufferLimit", func(ctx context.Context) string {
		u := sc.gatewayXR(ctx)
		if s := wantCondition(u, gateway.ConditionType, "False"); s != "" {
			return s
		}
		msg := fmt.Sprint(harness.Condition(u, gateway.ConditionType)["message"])
		if r := harness.ConditionReason(u, gateway.ConditionType); r != gateway.ReasonSpecRefused || !strings.Contains(msg, "spec.connection.bufferLimit") {
			return fmt.Sprintf("GatewayReady=False (%s): %s", r, msg)
		}
		return ""
	})
	sc.eventually(t, waitRoute, "the route RoutingReady=False (WaitingForGateway) naming the gateway's refusal", func(ctx context.Context) string {
		u, err := sc.get(ctx, harness.GVRModelRoute, harness.TeamControlNS, harness.RouteName)
		if err != nil {
			return err.Error()
		}
		msg := fmt.Sprint(harness.Condition(u, route.ConditionType)["message"])
		if st, rs := harness.ConditionStatus(u, route.ConditionType), harness.ConditionReason(u, route.ConditionType); st != "False" || rs != route.ReasonWaitingForGateway || !strings.Contains(msg, refusedMessage) || !strings.Contains(msg, `"`+harness.GatewayXRName+`"`) {
			return fmt.Sprintf("RoutingReady=%s (%s): %s", st, rs, msg)
		}
		return ""
	})
	down, ok := firstAfter(w.RouteTransitions(harness.TeamControlNS, harness.RouteName), start, "False")
	if !ok {
		t.Fatal("the watcher saw no RoutingReady=False transition of the model route")
	}
	follow := down.Sub(start)
	t.Logf("scenario 5h: %.1fs after the refused bufferLimit, RoutingReady=False naming the gateway's refusal (the route's breaker open: %t)", follow.Seconds(), heldBack == 1)
	sc.sp.Record("scenario-5h", "route-follows-refused-gateway-s", seconds(follow))
	sc.sp.Record("scenario-5h", "route-held-back-at-refusal", heldBack)
	after, err := sc.gatewayState(sc.ctx)
	harness.Must(t, err)
	// The gateway-status ConfigMap is the one Object that changes: it
	// says SpecRefused.
	delete(before, "Object gateway-status")
	delete(after, "Object gateway-status")
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("the gateway changed while its spec was refused: before %v, after %v", before, after)
	}

	fixedAt := time.Now()
	patchLimit(good)
	fixed = true
	sc.eventually(t, waitRoute, "GatewayReady and RoutingReady True once the spec is fixed", func(ctx context.Context) string {
		if s := wantCondition(sc.gatewayXR(ctx), gateway.ConditionType, "True"); s != "" {
			return "the gateway: " + s
		}
		u, err := sc.get(ctx, harness.GVRModelRoute, harness.TeamControlNS, harness.RouteName)
		if err != nil {
			return err.Error()
		}
		return wantCondition(u, route.ConditionType, "True")
	})
	sc.recordRecovery(t, "5h", "the fix", fixedAt)
	sc.noDeletions(t)
	w.Check(t)
}
