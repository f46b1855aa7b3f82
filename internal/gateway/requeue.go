package gateway

import (
	"time"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
)

// requeueAfter is how soon the gateway should be reconciled again, or 0 to
// leave it to the caller. While GatewayReady is False it backs off from a
// second (compose.Backoff): the end of a rollout is what GatewayReady
// waits for, and the rollout's own events are what open the gateway's
// circuit breaker, so its watch events cannot be relied on. A True
// GatewayReady needs no hurry, nor does SecretsMissing, which waits for a
// person (and for Crossplane's next look at the Secrets, which it does not
// watch), nor ClusterAlreadyHasGateway.
//
// markerDue, when not zero, is when the function will write its own
// ext-proc marker (marker.go): the gateway is reconciled again no later
// than that, whatever the back-off says, since no watch event may come
// to wake it.
func requeueAfter(xr map[string]any, c compose.Condition, now, markerDue time.Time) time.Duration {
	var d time.Duration
	if !c.Status && c.Reason != ReasonSecretsMissing && c.Reason != ReasonClusterAlreadyHasGateway {
		d = compose.Backoff(xr, ConditionType, now)
	}
	if until := markerDue.Sub(now); !markerDue.IsZero() && until > 0 && (d == 0 || until < d) {
		d = until
	}
	return d
}
