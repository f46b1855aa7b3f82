package controlplane

import (
	"testing"
	"time"

	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// recordRecovery records under the scenario's key, and logs, how long
// after fixedAt, when what ended a gateway's spell was written, GatewayReady
// was True, and how long after that the model route's RoutingReady
// followed, against the 2 s goal (logged, not asserted).
func (sc *scenarios) recordRecovery(t *testing.T, scenario, what string, fixedAt time.Time) {
	t.Helper()
	gw, _ := sc.w.Transitions()
	gr, okG := firstAfter(gw, fixedAt, "True")
	rr, okR := firstAfter(sc.w.RouteTransitions(harness.TeamControlNS, harness.RouteName), fixedAt, "True")
	if !okG || !okR {
		return
	}
	lag := rr.Sub(gr)
	sc.sp.Record("scenario-"+scenario, "gateway-ready-after-fix", seconds(gr.Sub(fixedAt)))
	sc.sp.Record("scenario-"+scenario, "routing-ready-after-gateway", seconds(lag))
	t.Logf("scenario %s: GatewayReady=True %.1fs after %s, RoutingReady=True %.1fs after GatewayReady (goal 2s)", scenario, gr.Sub(fixedAt).Seconds(), what, lag.Seconds())
	if lag > followGoal(1) {
		t.Logf("GOAL MISSED: the ModelRoute followed its gateway up %.1fs after it, more than %s", lag.Seconds(), followGoal(1))
	}
}
