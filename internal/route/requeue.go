package route

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
)

// Requeue intervals of a ModelRoute (requeueAfter says why).
const (
	// ReadyRequeue is the TTL of a RoutingReady ModelRoute whose watch
	// events flow. Everything a ready route follows wakes it through a
	// watched Object: its gateway (the gateway-status ConfigMap), its
	// sources (the sources ConfigMap: a rotated API key or CA), and its
	// own objects on the gateway cluster. So the TTL is only a safety net,
	// for what no watch carries (a change of the function's input), and
	// a hundred resting routes cost a few requests a second, not dozens.
	ReadyRequeue = 10 * time.Minute
	// WatchedGatewayRequeue is the TTL while both the InferenceGateway and
	// the gateway-status ConfigMap say the gateway is not ready.
	WatchedGatewayRequeue = time.Minute
	// StuckGatewayRequeue is the slowest a ModelRoute looks at a gateway
	// that is not reporting, has lost its cluster, or whose two verdicts
	// disagree (stuckBackoff); GatewayLostCluster has it from the start.
	StuckGatewayRequeue = 10 * time.Second
	// HeldBackRoutingRequeue is the TTL of a RoutingReady ModelRoute
	// whose watch events Crossplane's circuit breaker holds back, for at
	// most the breaker's cooldown. The breaker opens at a ModelRoute's
	// creation, whose every composed Object changes several times (the
	// provider's finalizer, its create annotations, its status: two
	// tokens each), so for a few minutes after it a route can only learn
	// of its gateway by looking, or by the breaker's half-open event, one
	// in 30 s (crossplane v2.2.0 and v2.3.0 internal/circuit/
	// token_bucket.go, halfOpenInterval). Looking more often than that
	// would cost a hundred new routes a reconcile each every few seconds,
	// each applying every composed Object once.
	HeldBackRoutingRequeue = 30 * time.Second
)

// stuckBackoff is how a ModelRoute waits for a gateway whose wait usually
// ends in a moment (gatewayWaitRequeue): from 2 s, doubling, to
// StuckGatewayRequeue.
var stuckBackoff = compose.Backoff{Min: 2 * time.Second, Max: StuckGatewayRequeue, Divisor: 1}

// requeueAfter is how soon a ModelRoute should be reconciled again, or 0
// for the caller's default. since is the start of
// its not-ready spell, which for a ModelRoute restarts with every new
// reason (compose.NotReadySince, perReason): each reason waits for a
// different party, and a new wait deserves its own fast start.
//
// What a ModelRoute waits for reaches it as watch events of its composed
// Objects: the gateway-status ConfigMap, the route, the generated
// HTTPRoute, the credentials. Crossplane does not watch the
// InferenceGateway, a required resource (crossplane v2.2.0 and v2.3.0
// internal/controller/apiextensions/composite/reconciler.go watches only
// composed resources), so a change of GatewayReady alone wakes no
// ModelRoute; only the TTL or a change of the ConfigMap does.
//
//   - Both say not ready (WaitingForGateway, watched): the gateway's
//     recovery changes the ConfigMap, whose watch event wakes the
//     ModelRoute; resting costs nothing (WatchedGatewayRequeue).
//   - GatewayStatusStale: the two disagree, or the InferenceGateway read is
//     an older verdict than the one the ModelRoute followed (older). Usually one is a moment behind
//     the other: the ConfigMap changes first, on the gateway cluster, and
//     the InferenceGateway's status a moment later, after Crossplane has
//     applied every composed resource; its event has already woken the
//     ModelRoute, and only the TTL brings the status that follows, so it
//     looks again from 2 s on, backing off to StuckGatewayRequeue
//     (stuckBackoff): a recovery is followed within seconds. Without
//     --enable-watches (off by default up to provider-kubernetes v1.3,
//     on from v1.4: v1.3.1 and v1.4.1 cmd/provider/main.go,
//     enable-watches and poll) the
//     ConfigMap's Object refreshes only at the provider's --poll, ten
//     minutes by default: then StuckGatewayRequeue.
//     A recovery still reaches the ModelRoute within a watch event when the
//     Object catches up (Crossplane watches it), or, when the Object
//     already showed True, within StuckGatewayRequeue.
//   - GatewayNotReporting: nothing was applied for the gateway while it
//     failed, and its status and reason in the ConfigMap are often what
//     they were before, so the gateway's first reconcile that reports again
//     writes when it did into the ConfigMap
//     (gateway.StatusKeyReportingSince), whose event wakes the ModelRoute.
//     stuckBackoff from the spell's start; and stuckBackoff again from
//     that time, for compose.FastFor, once the ConfigMap says the gateway
//     reports again since this spell began, since its event may come
//     before the InferenceGateway's status.
//   - GatewayLostCluster: the other InferenceGateway must go, or this one
//     move, both a person's acts; the winner's deletion removes its
//     ConfigMap and this gateway's first reconcile on the cluster composes
//     its own, and each wakes the ModelRoute through the watch, so
//     StuckGatewayRequeue from the start.
//
// While Crossplane's circuit breaker holds the watch events back (a new
// ModelRoute's own creation burst does, for the cooldown), any other wait
// backs off from 2 s to the breaker's half-open interval
// (compose.HeldBackBackoff), and a RoutingReady that is True is looked at
// again every HeldBackRoutingRequeue. While the events flow, any other
// wait is woken by them (the credentials', the backends', AI Gateway's
// and Envoy Gateway's verdicts are all in watched Objects, a late key in
// the sources ConfigMap), and backs off from 2 s to 5 minutes
// (compose.RestingBackoff), a safety net; a True RoutingReady rests for
// ReadyRequeue. No wait looks every second: with a hundred routes, that
// is a storm of applies the control plane cannot drain.
func requeueAfter(req compose.Request, p *compose.Problems, gw gatewayView, since *metav1.Time) time.Duration {
	heldBack := compose.WatchesHeldBack(req.Composite, req.Now, req.Input.CircuitBreakerCooldown.Duration)
	switch {
	case p.None() && heldBack:
		return HeldBackRoutingRequeue
	case p.None():
		return ReadyRequeue
	}
	// A False RoutingReady always has a spell (compose.NotReadySince);
	// without one it begins now.
	start := req.Now
	if since != nil {
		start = since.Time
	}
	if d, ok := gatewayWaitRequeue(req, p, gw, start); ok {
		return d
	}
	switch {
	case heldBack && p.Leads(ReasonWaitingForGateway) && gw.verdict.Reported && gateway.RollingOut(gw.verdict.Reason) && req.Now.Sub(start) < compose.FastFor:
		// A new route on a gateway that rolls out (its own objects
		// usually arrive meanwhile): the rollout's end changes the
		// gateway-status ConfigMap, whose event the route's breaker
		// drops, so only the TTL brings it. For at most compose.FastFor
		// of the wait: a fleet of new routes on a rollout that lasts
		// would otherwise look every second. Routes created on a gateway
		// that serves never look every second.
		return compose.FollowTTL
	case heldBack:
		return compose.HeldBackBackoff.After(start, req.Now)
	case p.Only(ReasonWaitingForGateway) && gw.watched:
		return WatchedGatewayRequeue
	}
	return compose.RestingBackoff.After(start, req.Now)
}

// gatewayWaitRequeue is the TTL of a ModelRoute, whose not-ready spell
// began at start, that waits only for a gateway that does not report, lost
// its cluster, or whose two verdicts disagree (requeueAfter says why
// each), and whether it waits so.
func gatewayWaitRequeue(req compose.Request, p *compose.Problems, gw gatewayView, start time.Time) (time.Duration, bool) {
	switch {
	case p.Only(ReasonGatewayLostCluster):
		return StuckGatewayRequeue, true
	case p.Only(ReasonGatewayNotReporting) && !gw.resumed.Before(start) && req.Now.Sub(gw.resumed) < compose.FastFor:
		// The ConfigMap says the gateway reports again, and woke this
		// ModelRoute; its condition follows in a moment.
		return stuckBackoff.After(gw.resumed, req.Now), true
	case p.Only(ReasonGatewayNotReporting), p.Only(ReasonGatewayStatusStale):
		return stuckBackoff.After(start, req.Now), true
	}
	return 0, false
}
