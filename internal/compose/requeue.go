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
// through a circuit breaker per composite (crossplane v2.2.0 and v2.3.0
// internal/circuit/token_bucket.go: a bucket of 100 tokens refilled at one
// a second; each update of a watched object takes two, for its old and new
// versions; when the bucket is empty the breaker opens for its cooldown,
// the Input's circuitBreakerCooldown, and lets one event through every 30
// seconds). A composite's creation, or an Envoy rollout, whose every
// Deployment status write reaches the watched envoy-deployment Object,
// empties it. The response TTL is not subject to the breaker: Crossplane
// requeues the composite after the shortest TTL of its pipeline
// (internal/controller/apiextensions/composite/reconciler.go), so while a
// composite's events may be held back, the TTL is what brings its
// condition. It is a safety net, not a clock: each reconcile applies every
// composed resource once, so a hundred composites looking every second
// are a storm the API server cannot drain. The TTL grows with the spell
// (Backoff): a wait that ends at once is seen at once, and one that lasts
// costs a few looks, not one a second.

// Backoff is how a composite's TTL grows within a not-ready spell: the
// spell so far divided by Divisor, no less than Min and no more than Max.
// With Divisor 1 each look comes when the spell is twice as old as at the
// one before, so a spell of length T costs about log2(T/Min) looks, and a
// wait that ends is seen at most one spell-length (or Max) late.
type Backoff struct {
	Min, Max time.Duration
	Divisor  int64
}

// After is the TTL of a spell that began at since, at now.
func (b Backoff) After(since, now time.Time) time.Duration {
	d := now.Sub(since)
	if b.Divisor > 1 {
		d /= time.Duration(b.Divisor)
	}
	return min(max(d, b.Min), b.Max)
}

// The back-offs of the two composites.
var (
	// GatewayBackoff is an InferenceGateway's: its GatewayReady follows an
	// Envoy rollout whose own events open its breaker, so it looks within
	// a quarter of the spell, and at least every 10 s; there is one
	// gateway per cluster, so its looks are cheap.
	GatewayBackoff = Backoff{Min: time.Second, Max: 10 * time.Second, Divisor: 4}
	// HeldBackBackoff is a ModelRoute's while its breaker holds its watch
	// events back: at most the breaker's half-open interval (30 s), which
	// lets an event through that often anyway.
	HeldBackBackoff = Backoff{Min: 2 * time.Second, Max: 30 * time.Second, Divisor: 1}
	// RestingBackoff is a ModelRoute's while its watch events flow: they
	// wake it for whatever it waits for, so the TTL only catches what no
	// watch carries (a required resource, such as an InferenceGateway
	// created after its routes).
	RestingBackoff = Backoff{Min: 2 * time.Second, Max: 5 * time.Minute, Divisor: 1}
)

// FollowTTL is the TTL of a composite whose breaker holds its events back
// while it waits for an Envoy rollout to end, for at most FastFor of its
// spell (a ModelRoute) or the breaker's cooldown (the InferenceGateway):
// the rollout's end is a watch event the breaker drops, and only the TTL
// brings it, within FollowTTL plus one reconcile (docs/speed.md, "Time to
// ready while the breaker is open").
const FollowTTL = time.Second

// FastFor is how long a wait for a gateway that does not report, or whose
// two verdicts disagree, may end in a moment: by then a route looks at it
// at its slowest (route.StuckGatewayRequeue).
const FastFor = 2 * time.Minute

// status.notReadySince is the composite's status field in which the function
// records when the current not-ready spell of its condition began. Both
// XRDs declare it (package/configuration/*/xrd.yaml, generated from the
// Status types): Crossplane prunes a status field the schema lacks.
//
// The condition's own lastTransitionTime cannot serve: Crossplane stamps
// every condition a function returns with the time of the call
// (crossplane v2.2.0 and v2.3.0 internal/controller/apiextensions/composite/
// composition_functions.go, FunctionComposer.Compose) and keeps the stored
// one only when type, status, reason and message are all equal
// (crossplane-runtime v2.2.0 apis/common/condition.go, in v2.3.0 the
// crossplane/apis/v2 module core/v2/condition.go,
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

// WatchesHeldBack reports whether Crossplane's circuit breaker is likely
// holding back the composite's watch events. Crossplane sets the
// composite's Responsive condition False, reason WatchCircuitOpen, at the
// start of every reconcile while the breaker is open (crossplane v2.2.0
// apis/apiextensions/v1/conditions.go, in v2.3.0 the crossplane/apis/v2
// module's apiextensions/v1/conditions.go, WatchCircuitOpen; both
// internal/controller/apiextensions/composite/reconciler.go). The breaker
// closes only when an event arrives after its cooldown
// (internal/circuit/token_bucket.go, RecordEvent), so a quiet composite
// keeps saying False long after the first event would pass again: only a
// False that began within the cooldown counts.
func WatchesHeldBack(xr map[string]any, now time.Time, cooldown time.Duration) bool {
	c := meta.FindStatusCondition(statusOf(xr).Conditions, "Responsive")
	return c != nil && c.Status == metav1.ConditionFalse && now.Sub(c.LastTransitionTime.Time) < cooldown
}
