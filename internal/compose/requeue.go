package compose

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/decode"
)

// How soon a composite whose condition is False is reconciled again, by
// how long its not-ready spell has lasted (NotReadySince).
//
// Crossplane reconciles a composite when a composed resource changes, but
// through a circuit breaker per composite (crossplane v2.2.0
// internal/circuit: a bucket of 100 tokens refilled at one a second; each
// update of a watched object takes two, for its old and new versions;
// when the bucket is empty the breaker opens for its cooldown, the
// Input's circuitBreakerCooldown, and lets one event through every 30
// seconds). A composite's creation, or an Envoy rollout, whose every
// Deployment status write reaches the watched envoy-deployment Object,
// empties it. The response TTL is not subject to the breaker: Crossplane
// requeues the composite after the shortest TTL of its pipeline
// (internal/controller/apiextensions/composite/reconciler.go), so while a
// composite waits for something that is about to happen and its events may
// be held back, a short TTL is what brings its condition within a second.
// It backs off so that a composite stuck for a reason that needs a person
// does not keep the API server busy: each reconcile applies every composed
// resource once.
const (
	// FastRequeue is the TTL for the first FastFor of a not-ready spell.
	FastRequeue = time.Second
	// FastFor is how long FastRequeue lasts: longer than a rollout of a
	// few Envoy pods takes.
	FastFor = 2 * time.Minute
	// SlowRequeue is the TTL after FastFor, until slowFor.
	SlowRequeue = 5 * time.Second
	// slowFor is when Backoff leaves the TTL to the caller's default for a
	// not-ready composite.
	slowFor = 10 * time.Minute
)

// status.notReadySince is the composite's status field in which the function
// records when the current not-ready spell of its condition began. Both
// XRDs declare it (package/configuration/*/xrd.yaml, generated from the
// Status types): Crossplane prunes a status field the schema lacks.
//
// The condition's own lastTransitionTime cannot serve: Crossplane stamps
// every condition a function returns with the time of the call
// (crossplane v2.2.0 internal/controller/apiextensions/composite/
// composition_functions.go, FunctionComposer.Compose) and keeps the stored
// one only when type, status, reason and message are all equal
// (crossplane-runtime v2.2.0 apis/common/condition.go,
// ConditionedStatus.SetConditions and Condition.Equal), so every new
// message, such as a rollout counter, restarts it.

// observedStatus is the part of an observed composite's status the
// back-off reads.
type observedStatus struct {
	Conditions    []metav1.Condition `json:"conditions"`
	NotReadySince *metav1.Time       `json:"notReadySince"`
}

// statusOf reads an observed composite's status. An unreadable status
// reads as empty: it only loses what the TTL remembers.
func statusOf(xr map[string]any) observedStatus {
	st := observedStatus{}
	if decode.Into("the composite", "status", xr["status"], &st) != nil {
		return observedStatus{}
	}
	return st
}

// NotReadySince is when the not-ready spell of c, which the composite
// reports now, began: nil while c is True, which leaves the field out of
// the desired status and so clears it (Crossplane applies the desired
// composite's status with server-side apply, as the field's only owner:
// composition_functions.go, FunctionComposer.Compose). A spell goes on
// while the observed composite carries the field and its condition of c's
// type is not True, and, when perReason is set, has c's reason; otherwise
// it begins now. A Fatal result leaves the observed status as it was, so a
// spell outlasts it.
func NotReadySince(xr map[string]any, c Condition, now time.Time, perReason bool) *metav1.Time {
	if c.Status {
		return nil
	}
	st := statusOf(xr)
	prev := meta.FindStatusCondition(st.Conditions, c.Type)
	switch {
	case st.NotReadySince == nil || st.NotReadySince.IsZero() || st.NotReadySince.After(now):
	case prev == nil || prev.Status == metav1.ConditionTrue:
	case perReason && prev.Reason != c.Reason:
	default:
		return st.NotReadySince
	}
	// Kubernetes times are kept to the second.
	return &metav1.Time{Time: now.Truncate(time.Second)}
}

// Backoff is the TTL for a composite whose not-ready spell began at since:
// FastRequeue, then SlowRequeue, then 0 (the caller's default).
func Backoff(since, now time.Time) time.Duration {
	switch d := now.Sub(since); {
	case d < FastFor:
		return FastRequeue
	case d < slowFor:
		return SlowRequeue
	}
	return 0
}

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
func WatchesHeldBack(xr map[string]any, now time.Time, cooldown time.Duration) bool {
	c := meta.FindStatusCondition(statusOf(xr).Conditions, "Responsive")
	return c != nil && c.Status == metav1.ConditionFalse && now.Sub(c.LastTransitionTime.Time) < cooldown
}
