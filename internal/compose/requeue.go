package compose

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/decode"
)

// How soon a composite whose condition is False is reconciled again, by
// how long it has been False.
//
// Crossplane reconciles a composite when a composed resource changes, but
// through a circuit breaker per composite (crossplane v2.2.0
// internal/circuit: a bucket of 100 tokens refilled at one a second; each
// update of a watched object takes two, for its old and new versions;
// when the bucket is empty the breaker opens for five minutes and lets one
// event through every 30 seconds). A composite's creation, or an Envoy
// rollout, whose every Deployment status write reaches the watched
// envoy-deployment Object, empties it. The response TTL is not subject to
// the breaker: Crossplane requeues the composite after the shortest TTL of
// its pipeline (internal/controller/apiextensions/composite/reconciler.go),
// so while a composite waits for something that is about to happen and
// its events may be held back, a short TTL is what brings its condition
// within a second. It backs off so that a composite stuck for a reason
// that needs a person does not keep the API server busy: each reconcile
// applies every composed resource once.
const (
	// FastRequeue is the TTL for the first FastFor of a False spell.
	FastRequeue = time.Second
	// FastFor is how long FastRequeue lasts: longer than a rollout of a
	// few Envoy pods takes.
	FastFor = 2 * time.Minute
	// SlowRequeue is the TTL after FastFor, until SlowFor.
	SlowRequeue = 5 * time.Second
	// SlowFor is when Backoff leaves the TTL to the caller's default for a
	// not-ready composite.
	SlowFor = 10 * time.Minute
)

// conditionsOf reads an observed composite's conditions. An unreadable
// status reads as none: it only loses what the TTL remembers.
func conditionsOf(xr map[string]any) []metav1.Condition {
	st := struct {
		Conditions []metav1.Condition `json:"conditions"`
	}{}
	if decode.Into("the composite", "status", xr["status"], &st) != nil {
		return nil
	}
	return st.Conditions
}

// Backoff is the TTL for a composite whose condition typ is False now:
// FastRequeue, then SlowRequeue, then 0 (the caller's default), by how long
// the observed composite has said False. A condition that the observed
// composite still has True (or not at all) has just turned False.
func Backoff(xr map[string]any, typ string, now time.Time) time.Duration {
	since := now
	if c := meta.FindStatusCondition(conditionsOf(xr), typ); c != nil && c.Status == metav1.ConditionFalse && !c.LastTransitionTime.IsZero() {
		since = c.LastTransitionTime.Time
	}
	return BackoffSince(since, now)
}

// BackoffSince is the TTL for a composite that has been waiting since
// since: FastRequeue, then SlowRequeue, then 0 (the caller's default).
func BackoffSince(since, now time.Time) time.Duration {
	switch d := now.Sub(since); {
	case d < FastFor:
		return FastRequeue
	case d < SlowFor:
		return SlowRequeue
	}
	return 0
}

// BreakerCooldown is how long Crossplane's circuit breaker stays open
// (crossplane v2.2.0, --circuit-breaker-cooldown, default 5m).
const BreakerCooldown = 5 * time.Minute

// WatchesHeldBack reports whether Crossplane's circuit breaker is likely
// holding back the composite's watch events. Crossplane sets the
// composite's Responsive condition False, reason WatchCircuitOpen, at the
// start of every reconcile while the breaker is open (crossplane v2.2.0
// apis/apiextensions/v1/conditions.go, WatchCircuitOpen;
// internal/controller/apiextensions/composite/reconciler.go). The breaker
// closes only when an event arrives after its cooldown
// (internal/circuit/token_bucket.go, RecordEvent), so a quiet composite
// keeps saying False long after the first event would pass again: only a
// False that began within the cooldown counts.
func WatchesHeldBack(xr map[string]any, now time.Time) bool {
	c := meta.FindStatusCondition(conditionsOf(xr), "Responsive")
	return c != nil && c.Status == metav1.ConditionFalse && now.Sub(c.LastTransitionTime.Time) < BreakerCooldown
}
