package controlplane

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/gatewayready"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/route"
)

// providerFirstPass is how long a restarted provider-kubernetes is given to
// observe every Object once: its Object informer's initial list is
// delivered as a create event per Object (controller-runtime v0.25.2 with
// provider-kubernetes v1.4.1, v0.24.1 with v1.3.1:
// pkg/internal/source/event_handler.go, OnAdd), and each is
// reconciled, so until that pass is over an Object may still show what it
// saw before the restart, or already what it sees after. The suite's few
// dozen Objects take seconds; the margin is for a loaded machine.
const providerFirstPass = 20 * time.Second

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
	// milliseconds (crossplane/crossplane#7062, replay_test.go), which a
	// poll may read.
	sc.eventually(t, waitRoute, "the model route routing before scenario 5i", func(ctx context.Context) string {
		if st := lastStatusBefore(w.routeTransitions(teamControlNS, routeName), time.Now()); st != "True" {
			return fmt.Sprintf("RoutingReady=%q by the recorded transitions; the route says %s", st, wantCondition(sc.routeXR(ctx), route.ConditionType, "True"))
		}
		return ""
	})

	c.restartProvider(sc.ctx, false)
	watching := false
	defer func() {
		if !watching {
			c.restartProvider(sc.ctx, true)
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
	_, err := c.dyn.Resource(gvrModelRoute).Namespace(teamControlNS).Patch(sc.ctx, routeName, types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"annotations":{"modelplane.ai/suite-look-now":%q}}}`, time.Now().Format(time.RFC3339Nano)), metav1.PatchOptions{})
	must(t, err)
	sc.eventually(t, waitRoute, "RoutingReady=False (GatewayStatusStale) naming --enable-watches", func(ctx context.Context) string {
		u := sc.routeXR(ctx)
		msg := fmt.Sprint(condition(u, route.ConditionType)["message"])
		if st, rs := conditionStatus(u, route.ConditionType), conditionReason(u, route.ConditionType); st != "False" || rs != route.ReasonGatewayStatusStale {
			return fmt.Sprintf("RoutingReady=%s (%s): %s", st, rs, msg)
		}
		if !strings.Contains(msg, "--enable-watches") || !strings.Contains(msg, gatewayready.ReasonCallerSecretsMissing) {
			return "the message names neither --enable-watches nor the gateway's reason: " + msg
		}
		return ""
	})
	down, ok := firstAfter(w.routeTransitions(teamControlNS, routeName), start, "False")
	if !ok {
		t.Fatal("the watcher saw no RoutingReady=False transition of the model route")
	}
	t.Logf("scenario 5i: RoutingReady=False %.1fs after spec.auth selected nothing: %v",
		down.Sub(start).Seconds(), condition(sc.routeXR(sc.ctx), route.ConditionType)["message"])

	sc.stuckRouteReconciles(t, "5i", "the disagreement", down)
	if s := wantCondition(sc.routeXR(sc.ctx), route.ConditionType, "False"); s != "" {
		t.Errorf("the route left GatewayStatusStale while the provider did not watch: %s", s)
	}

	// The spec.auth of this scenario composed the caller-auth policy, which
	// denies every caller while no Secret is selected; removing spec.auth
	// removes it, as in scenario 5c.
	w.allow(allowance{reason: "scenario 5i removes its spec.auth: the caller-auth policy goes", resource: "securitypolicies", namespace: gatewayNS, name: names.CallerPolicy(gatewayXRName)})
	if o := sc.composedObject(sc.ctx, objectNS, gatewayXRName, gateway.ResourceCallerAuth); o != nil {
		w.allow(allowance{reason: "scenario 5i removes its spec.auth: the caller-auth policy's Object goes", resource: "objects", namespace: objectNS, name: o.GetName()})
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

	c.restartProvider(sc.ctx, true)
	watching = true
	sc.noDeletions(t)
	w.check(t)
}
