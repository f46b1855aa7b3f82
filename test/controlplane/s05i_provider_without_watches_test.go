package controlplane

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/gatewayready"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/route"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// watchesOff is scenario 5i, issue 21's item 4 for provider-kubernetes
// with watches off (--no-enable-watches, as runProvider says; the default
// up to v1.3.1, on from v1.4: cmd/provider/main.go, enable-watches). The
// provider then looks at what an Object names only at its
// --poll, ten minutes give or take a tenth, so the ModelRoute's Object of
// the gateway-status ConfigMap keeps what it saw at the provider's start,
// while the InferenceGateway, which Crossplane reconciles on its own spec
// change, reports at once. A spec.auth that selects no Secret makes
// GatewayReady False (CallerSecretsMissing) by the function's own verdict,
// which needs no watch to be seen. The route's two views of its gateway
// then disagree for as long as the poll is away: at its next look the
// route must say GatewayStatusStale, naming the flag, and must not spin
// (after compose.FastFor it is looked at every route.StuckGatewayRequeue).
// A ready route looks by itself only every route.ReadyRequeue, ten
// minutes, since with watches every change of its gateway reaches it as
// an event; without them that is how long it may take to notice, and the
// suite does not wait for it: it annotates the ModelRoute, a change of
// the composite that Crossplane does watch (with no predicate: crossplane
// v2.2.0 and v2.3.0 internal/controller/apiextensions/definition/
// reconciler.go, the composite's WatchFor), as a person's edit would, so
// the route looks now. Once
// spec.auth is removed (its deny-all caller-auth policy goes with it) the
// two views agree again, and the route follows within its TTL, without a
// watch event (the lag is logged against the 2 s goal, not asserted). The provider is then restarted with watches,
// as every other scenario runs it.
func (sc *scenarios) watchesOff(t *testing.T) {
	c, w := sc.c, sc.w
	if s := wantCondition(sc.gatewayXR(sc.ctx), gateway.ConditionType, "True"); s != "" {
		t.Fatalf("the gateway is not serving before scenario 5i: %s", s)
	}
	// By the world's judged record, not a poll: right after 5h's
	// recovery, Crossplane can write the route's previous False back for
	// milliseconds (crossplane/crossplane#7062, harness/replay.go), which a
	// poll may read.
	sc.eventually(t, waitRoute, "the model route routing before scenario 5i", func(ctx context.Context) string {
		if st := lastStatusBefore(w.RouteTransitions(harness.TeamControlNS, harness.RouteName), time.Now()); st != "True" {
			return fmt.Sprintf("RoutingReady=%q by the recorded transitions; the route says %s", st, wantCondition(sc.routeXR(ctx), route.ConditionType, "True"))
		}
		return ""
	})

	c.RestartProvider(sc.ctx, false)
	watching := false
	defer func() {
		if !watching {
			c.RestartProvider(sc.ctx, true)
		}
	}()
	time.Sleep(providerFirstPass)

	start := time.Now()
	sc.patchGateway(t, `{"spec":{"auth":{"method":"APIKey","apiKey":{"secretSelector":{"matchLabels":{"modelplane.ai/scenario":"5i-selects-nothing"}}}}}}`)
	removed := false
	defer func() {
		if !removed {
			sc.patchGateway(t, `{"spec":{"auth":null}}`)
		}
	}()
	sc.gatewayFalse(t, "a spec.auth that selects no Secret", gatewayready.ReasonCallerSecretsMissing, "")
	// The route hears of it at its next look: its Objects do not change,
	// and its TTL is long (route.ReadyRequeue).
	_, err := c.Dyn.Resource(harness.GVRModelRoute).Namespace(harness.TeamControlNS).Patch(sc.ctx, harness.RouteName, types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"annotations":{"modelplane.ai/suite-look-now":%q}}}`, time.Now().Format(time.RFC3339Nano)), metav1.PatchOptions{})
	harness.Must(t, err)
	sc.eventually(t, waitRoute, "RoutingReady=False (GatewayStatusStale) naming --enable-watches", func(ctx context.Context) string {
		u := sc.routeXR(ctx)
		msg := fmt.Sprint(harness.Condition(u, route.ConditionType)["message"])
		if st, rs := harness.ConditionStatus(u, route.ConditionType), harness.ConditionReason(u, route.ConditionType); st != "False" || rs != route.ReasonGatewayStatusStale {
			return fmt.Sprintf("RoutingReady=%s (%s): %s", st, rs, msg)
		}
		if !strings.Contains(msg, "--enable-watches") || !strings.Contains(msg, gatewayready.ReasonCallerSecretsMissing) {
			return "the message names neither --enable-watches nor the gateway's reason: " + msg
		}
		return ""
	})
	down, ok := firstAfter(w.RouteTransitions(harness.TeamControlNS, harness.RouteName), start, "False")
	if !ok {
		t.Fatal("the watcher saw no RoutingReady=False transition of the model route")
	}
	t.Logf("scenario 5i: RoutingReady=False %.1fs after spec.auth selected nothing: %v",
		down.Sub(start).Seconds(), harness.Condition(sc.routeXR(sc.ctx), route.ConditionType)["message"])

	sc.stuckRouteReconciles(t, "5i", "the disagreement", down)
	if s := wantCondition(sc.routeXR(sc.ctx), route.ConditionType, "False"); s != "" {
		t.Errorf("the route left GatewayStatusStale while the provider did not watch: %s", s)
	}

	// The spec.auth of this scenario composed the caller-auth policy, which
	// denies every caller while no Secret is selected; removing spec.auth
	// removes it, as in scenario 5c.
	w.Allow(harness.Allowance{Reason: "scenario 5i removes its spec.auth: the caller-auth policy goes", Resource: "securitypolicies", Namespace: harness.GatewayNS, Name: names.CallerPolicy(harness.GatewayXRName)})
	if o := sc.composedObject(sc.ctx, harness.ObjectNS, harness.GatewayXRName, gateway.ResourceCallerAuth); o != nil {
		w.Allow(harness.Allowance{Reason: "scenario 5i removes its spec.auth: the caller-auth policy's Object goes", Resource: "objects", Namespace: harness.ObjectNS, Name: o.GetName()})
	}
	fixedAt := time.Now()
	sc.patchGateway(t, `{"spec":{"auth":null}}`)
	removed = true
	sc.eventually(t, waitRoute, "GatewayReady and RoutingReady True once spec.auth is removed, without watches", func(ctx context.Context) string {
		if s := wantCondition(sc.gatewayXR(ctx), gateway.ConditionType, "True"); s != "" {
			return "the gateway: " + s
		}
		return wantCondition(sc.routeXR(ctx), route.ConditionType, "True")
	})
	// Without watches the route looks every route.StuckGatewayRequeue.
	sc.recordRecovery(t, "5i", "spec.auth was removed", fixedAt)

	c.RestartProvider(sc.ctx, true)
	watching = true
	sc.noDeletions(t)
	w.Check(t)
}

// stuckRouteReconciles waits for, and counts, the model route's
// reconciles over the minute from compose.FastFor and 5 s after down, the
// start of a spell in which it waits for a gateway stuck in the state
// spell names: the fast looks are over by then, and it must be looked at
// every route.StuckGatewayRequeue, neither never nor more often
// (stuckReconcilesProblem; s05d_front_door_second_gateway_test.go's routeOnLostGateway says
// why calls come in pairs). The count is the function's log
// (parseFunctionCalls fails if its line is gone); Crossplane's own count
// of ModelRoute reconciles in the window is logged beside it.
func (sc *scenarios) stuckRouteReconciles(t *testing.T, scenario, spell string, down time.Time) {
	t.Helper()
	from := down.Add(compose.FastFor + 5*time.Second)
	const window = 60 * time.Second
	time.Sleep(time.Until(from))
	xp := sc.c.ModelRouteReconciles(sc.ctx)
	time.Sleep(time.Until(from.Add(window)))
	t.Logf("scenario %s: Crossplane's metrics over the window, every ModelRoute: %s", scenario, sc.c.ModelRouteReconciles(sc.ctx).Since(xp))
	calls, err := sc.c.FunctionCallTimes("ModelRoute", harness.RouteName, from, from.Add(window))
	harness.Must(t, err)
	reconciles := bursts(calls, time.Second)
	if msg := stuckReconcilesProblem(len(reconciles), window); msg != "" {
		t.Errorf("Crossplane reconciled the ModelRoute %d times in the %s from %s into %s: %s; calls at %v",
			len(reconciles), window, from.Sub(down).Round(time.Second), spell, msg, calls)
	}
	sc.sp.Record("scenario-"+scenario, "stuck-route-reconciles", float64(len(reconciles)))
	t.Logf("scenario %s: %d reconciles (%d function calls) of the ModelRoute in the %s from %s into %s, at %v",
		scenario, len(reconciles), len(calls), window, from.Sub(down).Round(time.Second), spell, reconciles)
}

// providerFirstPass is how long a restarted provider-kubernetes is given to
// observe every Object once: its Object informer's initial list is
// delivered as a create event per Object (controller-runtime v0.25.2 with
// provider-kubernetes v1.4.1, v0.24.1 with v1.3.1:
// pkg/internal/source/event_handler.go, OnAdd), and each is
// reconciled, so until that pass is over an Object may still show what it
// saw before the restart, or already what it sees after. The suite's few
// dozen Objects take seconds; the margin is for a loaded machine.
const providerFirstPass = 20 * time.Second
