package gatewayready

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
)

// RequeueAfter is how soon the gateway should be reconciled again, or 0 to
// leave it to the caller. While the Envoy Deployment rolls out and
// Crossplane's breaker holds the gateway's events back, it looks every
// compose.FollowTTL (RollingOut). Otherwise, while GatewayReady is False it backs off
// (compose.GatewayBackoff: from a second, by a quarter of the spell, to
// 10 s), measured from since, the start of the not-ready spell the
// function records (compose.NotReadySince): the end of a rollout is what
// GatewayReady waits for, and the rollout's own events are what open the
// gateway's circuit breaker, so its watch events cannot be relied on. A
// True GatewayReady needs no hurry while the breaker is closed; while it
// holds the gateway's watch events back (compose.WatchesHeldBack, for the
// Input's circuitBreakerCooldown), a True GatewayReady is looked at again
// at the back-off's slowest, so that a change on the gateway cluster does
// not leave it stale for the SDK's one-minute TTL.
// TLSSecretMissing and CallerSecretsMissing wait for a person (and for
// Crossplane's next look at the Secrets, which it does not watch), and so
// does ClusterAlreadyHasGateway.
//
// markerDue, when not zero, is when the function will write its own
// ext-proc marker (marker.go): the gateway is reconciled again no later
// than that, whatever the back-off says, since no watch event may come
// to wake it.
func RequeueAfter(req compose.Request, c compose.Condition, since *metav1.Time, markerDue time.Time) time.Duration {
	now := req.Now
	heldBack := func() bool {
		return compose.WatchesHeldBack(req.Composite, now, req.Input.CircuitBreakerCooldown.Duration)
	}
	var d time.Duration
	switch {
	case c.Status && heldBack():
		d = compose.GatewayBackoff.Max
	case !c.Status && RollingOut(c.Reason) && heldBack():
		// The rollout's end is what GatewayReady waits for, and the
		// rollout's own events opened the breaker that holds back the
		// event of its end: look every FollowTTL until it is seen. One
		// gateway per cluster, and only within the breaker's cooldown.
		d = compose.FollowTTL
	case !c.Status && since != nil && !waitsForPerson(c.Reason):
		d = compose.GatewayBackoff.After(since.Time, now)
	}
	if until := markerDue.Sub(now); !markerDue.IsZero() && until > 0 && (d == 0 || until < d) {
		d = until
	}
	return d
}

// waitsForPerson reports whether a False GatewayReady's reason waits for
// someone to create or fix a Secret, or to settle which InferenceGateway
// serves the cluster, rather than for a controller.
func waitsForPerson(reason string) bool {
	switch reason {
	case ReasonTLSSecretMissing, ReasonCallerSecretsMissing, ReasonClusterAlreadyHasGateway:
		return true
	}
	return false
}

// RollingOut reports whether a False GatewayReady's reason is the Envoy
// Deployment's rollout (or its first sight), which ends by the Deployment
// controller's and AI Gateway's doing, usually within a minute, and whose
// end a ModelRoute waiting for the gateway wants to hear of at once.
func RollingOut(reason string) bool {
	switch reason {
	case ReasonDeploymentNotObserved, ReasonGenerationNotObserved, ReasonExtProcMarkerMissing, ReasonOldReplicasPresent, ReasonNoReplicaAvailable:
		return true
	}
	return false
}
