package controlplane

import (
	"testing"
	"time"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
)

// stuckRouteReconciles waits for, and counts, the model route's
// reconciles over the minute from compose.FastFor and 5 s after down, the
// start of a spell in which it waits for a gateway stuck in the state
// spell names: the fast looks are over by then, and it must be looked at
// every route.StuckGatewayRequeue, neither never nor more often
// (stuckReconcilesProblem; lostcluster_test.go's routeOnLostGateway says
// why calls come in pairs). The count is the function's log
// (parseFunctionCalls fails if its line is gone); Crossplane's own count
// of ModelRoute reconciles in the window is logged beside it.
func (sc *scenarios) stuckRouteReconciles(t *testing.T, scenario, spell string, down time.Time) {
	t.Helper()
	from := down.Add(compose.FastFor + 5*time.Second)
	const window = 60 * time.Second
	time.Sleep(time.Until(from))
	xp := sc.c.modelRouteReconciles(sc.ctx)
	time.Sleep(time.Until(from.Add(window)))
	t.Logf("scenario %s: Crossplane's metrics over the window, every ModelRoute: %s", scenario, sc.c.modelRouteReconciles(sc.ctx).since(xp))
	calls, err := sc.c.functionCallTimes("ModelRoute", routeName, from, from.Add(window))
	must(t, err)
	reconciles := bursts(calls, time.Second)
	if msg := stuckReconcilesProblem(len(reconciles), window); msg != "" {
		t.Errorf("Crossplane reconciled the ModelRoute %d times in the %s from %s into %s: %s; calls at %v",
			len(reconciles), window, from.Sub(down).Round(time.Second), spell, msg, calls)
	}
	sc.sp.record("scenario-"+scenario, "stuck-route-reconciles", float64(len(reconciles)))
	t.Logf("scenario %s: %d reconciles (%d function calls) of the ModelRoute in the %s from %s into %s, at %v",
		scenario, len(reconciles), len(calls), window, from.Sub(down).Round(time.Second), spell, reconciles)
}

// recordRecovery records under the scenario's key, and logs, how long
// after fixedAt, when what ended a gateway's spell was written, GatewayReady
// was True, and how long after that the model route's RoutingReady
// followed, against the 2 s goal (logged, not asserted).
func (sc *scenarios) recordRecovery(t *testing.T, scenario, what string, fixedAt time.Time) {
	t.Helper()
	gw, _ := sc.w.transitions()
	gr, okG := firstAfter(gw, fixedAt, "True")
	rr, okR := firstAfter(sc.w.routeTransitions(teamControlNS, routeName), fixedAt, "True")
	if !okG || !okR {
		return
	}
	lag := rr.Sub(gr)
	sc.sp.record("scenario-"+scenario, "gateway-ready-after-fix", seconds(gr.Sub(fixedAt)))
	sc.sp.record("scenario-"+scenario, "routing-ready-after-gateway", seconds(lag))
	t.Logf("scenario %s: GatewayReady=True %.1fs after %s, RoutingReady=True %.1fs after GatewayReady (goal 2s)", scenario, gr.Sub(fixedAt).Seconds(), what, lag.Seconds())
	if lag > followGoal(1) {
		t.Logf("GOAL MISSED: the ModelRoute followed its gateway up %.1fs after it, more than %s", lag.Seconds(), followGoal(1))
	}
}
