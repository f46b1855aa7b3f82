package route

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
)

// Requeue intervals of a ModelRoute that waits for its gateway
// (requeueAfter says why).
const (
	// WatchedGatewayRequeue is the TTL while both the InferenceGateway and
	// the gateway-status ConfigMap say the gateway is not ready.
	WatchedGatewayRequeue = time.Minute
	// StuckGatewayRequeue is the TTL once a gateway that is not reporting,
	// has lost its cluster, or whose two verdicts disagree, has stayed so
	// for compose.FastFor; GatewayLostCluster has it from the start.
	StuckGatewayRequeue = 10 * time.Second
	// HeldBackRoutingRequeue is the TTL of a RoutingReady ModelRoute
	// whose watch events Crossplane's circuit breaker holds back, for at
	// most the breaker's cooldown. The breaker opens at a ModelRoute's
	// creation, whose every composed Object changes several times (the
	// provider's finalizer, its create annotations, its status: two
	// tokens each), so for a few minutes after it a route can only learn
	// of its gateway by looking. Each look applies every composed Object
	// once, so it is no faster than the InferenceGateway's own
	// (compose.SlowRequeue): with a hundred routes created at once, a
	// second would be a thousand writes a second.
	HeldBackRoutingRequeue = compose.SlowRequeue
)

// requeueAfter is how soon a ModelRoute that is not RoutingReady should be
// reconciled again, or 0 for the caller's default. since is the start of
// its not-ready spell, which for a ModelRoute restarts with every new
// reason (compose.NotReadySince, perReason): each reason waits for a
// different party, and a new wait deserves its own fast start.
//
// What a ModelRoute waits for reaches it as watch events of its composed
// Objects: the gateway-status ConfigMap, the route, the generated
// HTTPRoute, the credentials. Crossplane does not watch the
// InferenceGateway, a required resource (crossplane v2.2.0
// internal/controller/apiextensions/composite/reconciler.go watches only
// composed resources), so a change of GatewayReady alone wakes no
// ModelRoute; only the TTL or a change of the ConfigMap does.
//
//   - Both say not ready (WaitingForGateway, watched): the gateway's
//     recovery changes the ConfigMap, whose watch event wakes the
//     ModelRoute; resting costs nothing (WatchedGatewayRequeue).
//   - GatewayStatusStale: the two disagree. Usually one is a moment behind
//     the other: the ConfigMap changes first, on the gateway cluster, and
//     the InferenceGateway's status a moment later, after Crossplane has
//     applied every composed resource; its event has already woken the
//     ModelRoute, and only the TTL brings the status that follows, so the
//     first compose.FastFor of the disagreement looks again every
//     compose.FastRequeue: a recovery is followed within 2 s. Without
//     --enable-watches (off by default up to provider-kubernetes v1.3:
//     v1.3.1 cmd/provider/main.go, enable-watches and poll) the
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
//     compose.FastRequeue for compose.FastFor, then StuckGatewayRequeue;
//     and compose.FastRequeue again, for compose.FastFor from that time,
//     once the ConfigMap says the gateway reports again since this spell
//     began, since its event may come before the InferenceGateway's status.
//   - GatewayLostCluster: the other InferenceGateway must go, or this one
//     move, both a person's acts; the winner's deletion removes its
//     ConfigMap and this gateway's first reconcile on the cluster composes
//     its own, and each wakes the ModelRoute through the watch, so
//     StuckGatewayRequeue from the start.
//
// While Crossplane's circuit breaker holds the watch events back (a new
// ModelRoute's own creation burst does, for the cooldown), any other wait
// backs off from a second (compose.Backoff), and a RoutingReady that is
// True is looked at again every HeldBackRoutingRequeue: the gateway's
// change would otherwise reach it only through the breaker's half-open
// probe, one event in 30 s (crossplane v2.2.0 internal/circuit/
// token_bucket.go, halfOpenInterval), or the one-minute default TTL. Waiting for the gateway and
// for something else at once leaves the TTL to the caller's default: the
// other thing's watch event, or the default, comes first.
func requeueAfter(req compose.Request, p *compose.Problems, gw gatewayView, since *metav1.Time) time.Duration {
	heldBack := compose.WatchesHeldBack(req.Composite, req.Now, req.Input.CircuitBreakerCooldown.Duration)
	switch {
	case p.None() && heldBack:
		return HeldBackRoutingRequeue
	case p.None():
		return 0
	}
	if d, ok := gatewayWaitRequeue(req, p, gw, since); ok {
		return d
	}
	switch {
	case since != nil && heldBack:
		return compose.Backoff(since.Time, req.Now)
	case p.Only(ReasonWaitingForGateway) && gw.watched:
		return WatchedGatewayRequeue
	}
	return 0
}

// gatewayWaitRequeue is the TTL of a ModelRoute that waits only for a
// gateway that does not report, lost its cluster, or whose two verdicts
// disagree (requeueAfter says why each), and whether it waits so.
func gatewayWaitRequeue(req compose.Request, p *compose.Problems, gw gatewayView, since *metav1.Time) (time.Duration, bool) {
	fastThenStuck := func() time.Duration {
		if since != nil && req.Now.Sub(since.Time) < compose.FastFor {
			return compose.FastRequeue
		}
		return StuckGatewayRequeue
	}
	switch {
	case p.Only(ReasonGatewayLostCluster):
		return StuckGatewayRequeue, true
	case p.Only(ReasonGatewayNotReporting) && since != nil && !gw.resumed.Before(since.Time) && req.Now.Sub(gw.resumed) < compose.FastFor:
		// The ConfigMap says the gateway reports again, and woke this
		// ModelRoute; its condition follows in a moment.
		return compose.FastRequeue, true
	case p.Only(ReasonGatewayNotReporting), p.Only(ReasonGatewayStatusStale):
		return fastThenStuck(), true
	}
	return 0, false
}
