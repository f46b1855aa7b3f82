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
func requeueAfter(xr map[string]any, c compose.Condition, now time.Time) time.Duration {
	if c.Status || c.Reason == ReasonSecretsMissing || c.Reason == ReasonClusterAlreadyHasGateway {
		return 0
	}
	return compose.Backoff(xr, ConditionType, now)
}
