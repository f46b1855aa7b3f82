package route

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/crossplane/function-sdk-go/errors"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/upstream"
)

// routeAccepted reads whether AI Gateway accepted the observed route.
func routeAccepted(req compose.Request, p *compose.Problems) (bool, error) {
	o, ok := req.Observed[ResourceRoute]
	if !ok || !o.Live() {
		p.Add(ReasonWaitingForRoute, "the AIGatewayRoute has not been observed on the gateway cluster yet")
		return false, nil
	}
	c, err := upstream.RouteAccepted(o.LiveAt("status"))
	if err != nil {
		return false, errors.Wrap(err, "cannot read the observed AIGatewayRoute")
	}
	switch {
	case c == nil:
		// AI Gateway writes a condition at the end of every reconcile of an
		// AIGatewayRoute, successful or not (ai-gateway v1.0.0
		// internal/controller/ai_gateway_route.go, Reconcile and
		// updateAIGatewayRouteStatus), so none at all means its controller
		// has not reconciled the route: it is not running, or far behind.
		// The same process serves Envoy Gateway's extension server, with
		// fail-open off, so Envoy Gateway publishes nothing new meanwhile.
		p.Add(ReasonWaitingForRoute, "AI Gateway has written no status on the AIGatewayRoute: check that AI Gateway's controller runs on the gateway cluster, and its log; until it does, Envoy keeps its last configuration")
		return false, nil
	case !upstream.IsTrue(c) && lostUpdateRace(c, req.Now):
		// AI Gateway retries at once, and meanwhile the HTTPRoute it
		// generated before is unchanged: what serves is what served, as
		// httpRouteServed judges it.
		return true, nil
	case !upstream.IsTrue(c):
		p.Add(ReasonWaitingForRoute, upstream.WithMessage("AI Gateway has not accepted the AIGatewayRoute yet", c))
		return false, nil
	}
	return true, nil
}

// updateRaceGrace is how long a lost update race of AI Gateway's on the
// HTTPRoute it generates is taken for the retry it is (lostUpdateRace).
const updateRaceGrace = 30 * time.Second

// updateRaceMessage is how AI Gateway's NotAccepted reads when its update of
// the HTTPRoute it generates lost an optimistic-concurrency race: its
// syncAIGatewayRoute gets the HTTPRoute and updates it, and the update
// fails with the API server's conflict ("Operation cannot be fulfilled on
// ...: the object has been modified") when anything, Envoy Gateway's
// status among them, wrote the HTTPRoute in between (ai-gateway v1.0.0
// internal/controller/ai_gateway_route.go, syncAIGatewayRoute; apimachinery
// pkg/api/errors, NewConflict).
const updateRaceMessage = "failed to update HTTPRoute: Operation cannot be fulfilled on "

// lostUpdateRace reports whether AI Gateway's verdict c on the route says
// only that it lost such a race, within updateRaceGrace of now. Its
// Reconcile then writes NotAccepted with the error and returns it, so
// controller-runtime requeues the route with its default back-off (AI
// Gateway sets no rate limiter of its own; client-go
// util/workqueue, DefaultControllerRateLimiter, from 5 ms), the retry reads
// the HTTPRoute afresh, and its write says Accepted (Reconcile,
// updateAIGatewayRouteStatus). The HTTPRoute generated before is not
// touched by the failed update, so nothing stops serving: a route that
// RoutingReady called serving stays so through the retry. AI Gateway stamps
// every status write with the time (newConditions), so a race lost again
// and again keeps a fresh stamp; the grace bounds one that stopped being
// retried.
func lostUpdateRace(c *metav1.Condition, now time.Time) bool {
	return strings.Contains(c.Message, updateRaceMessage) && now.Sub(c.LastTransitionTime.Time) < updateRaceGrace
}

// httpRouteServed reads whether Envoy Gateway accepted the HTTPRoute AI
// Gateway generated, for our Gateway, and resolved all its backends. An
// HTTPRoute it rejects, or whose Backends do not resolve, serves nothing
// (gateway-api v1.5.1 apis/v1/shared_types.go, RouteConditionAccepted and
// RouteConditionResolvedRefs).
//
// It reads Envoy Gateway's verdict for the listener the route is composed
// on (gw, when the gateway is known), not the first it finds for the
// Gateway: when TLS is turned on the route moves from http to https, and
// the entry for http stays on the HTTPRoute with its NotAllowedByListeners
// (upstream.RouteParentConditions).
func httpRouteServed(req compose.Request, p *compose.Problems, gw *gateway.RouteView) (bool, error) {
	o, ok := req.Observed[ResourceHTTPRoute]
	if !ok || !o.Live() {
		p.Add(ReasonHTTPRouteNotAccepted, "the HTTPRoute AI Gateway generates for the route has not been observed on the gateway cluster yet")
		return false, nil
	}
	in := req.Input
	conds, reported, err := upstream.RouteParentConditions(o.LiveAt("status"), in.GatewayNamespace, in.GatewayName, judgedListener(gw))
	if err != nil {
		return false, errors.Wrap(err, "cannot read the observed HTTPRoute")
	}
	if !reported {
		p.Add(ReasonHTTPRouteNotAccepted, fmt.Sprintf("Envoy Gateway has not reported on the HTTPRoute for the Gateway %q yet", in.GatewayName))
		return false, nil
	}
	for _, t := range []gwapiv1.RouteConditionType{gwapiv1.RouteConditionAccepted, gwapiv1.RouteConditionResolvedRefs} {
		c := meta.FindStatusCondition(conds, string(t))
		if c == nil {
			p.Add(ReasonHTTPRouteNotAccepted, fmt.Sprintf("Envoy Gateway does not report the HTTPRoute %s for the Gateway %q", t, in.GatewayName))
			return false, nil
		}
		if !upstream.IsTrue(c) {
			p.Add(ReasonHTTPRouteNotAccepted, fmt.Sprintf("Envoy Gateway reports the HTTPRoute %s=%s (%s): %s", t, c.Status, c.Reason, c.Message))
			return false, nil
		}
	}
	return true, nil
}

// judgedListener is the listener of the gateway gw whose verdicts Envoy
// Gateway writes on the route's objects are read, or "" for the first of
// any listener while the gateway is not known.
func judgedListener(gw *gateway.RouteView) string {
	if gw == nil {
		return ""
	}
	return listenerOf(gw)
}
