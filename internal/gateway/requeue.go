package gateway

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/decode"
)

// How soon an InferenceGateway is reconciled again while GatewayReady is
// False, by how long it has been False.
//
// Crossplane reconciles a composite when a composed resource changes, but
// through a circuit breaker per composite (crossplane v2.2.0
// internal/circuit: a bucket of 100 tokens refilled at one a second; each
// update of a watched object takes two, for its old and new versions;
// when the bucket is empty the breaker opens for five minutes and lets one
// event through every 30 seconds). A new gateway's creation, or an Envoy
// rollout, whose every Deployment status write reaches the watched
// envoy-deployment Object, empties it. The response TTL is not subject to
// the breaker: Crossplane requeues the composite after the shortest TTL of
// its pipeline (internal/controller/apiextensions/composite/reconciler.go),
// so while the gateway waits for something that is about to happen, a
// short TTL is what brings GatewayReady within a second of the rollout.
// It backs off so that a gateway stuck for a reason that needs a person
// does not keep the API server busy: each reconcile applies every composed
// resource once (about ten requests).
const (
	// FastRequeue is the TTL for the first FastFor of a False spell.
	FastRequeue = time.Second
	// FastFor is how long FastRequeue lasts: longer than a rollout of a
	// few Envoy pods takes.
	FastFor = 2 * time.Minute
	// SlowRequeue is the TTL after FastFor, until SlowFor.
	SlowRequeue = 5 * time.Second
	// SlowFor is when the function leaves the TTL to the caller's default
	// for a not-ready composite.
	SlowFor = 10 * time.Minute
)

// requeueAfter is how soon the gateway should be reconciled again, or 0 to
// leave it to the caller. A True GatewayReady needs no hurry, nor does
// SecretsMissing, which waits for a person (and for Crossplane's next look
// at the Secrets, which it does not watch).
func requeueAfter(xr map[string]any, c compose.Condition, now time.Time) time.Duration {
	if c.Status || c.Reason == ReasonSecretsMissing {
		return 0
	}
	since := now
	st := struct {
		Conditions []metav1.Condition `json:"conditions"`
	}{}
	// An unreadable status only loses the back-off's memory.
	if decode.Into("the InferenceGateway", "status", xr["status"], &st) == nil {
		if prev := meta.FindStatusCondition(st.Conditions, ConditionType); prev != nil && prev.Status == metav1.ConditionFalse && !prev.LastTransitionTime.IsZero() {
			since = prev.LastTransitionTime.Time
		}
	}
	switch d := now.Sub(since); {
	case d < FastFor:
		return FastRequeue
	case d < SlowFor:
		return SlowRequeue
	}
	return 0
}
