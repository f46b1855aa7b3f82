package gateway

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/input/v1beta1"
)

// TestRequeueAfterWaitsForPerson checks that a False GatewayReady backs off
// from its spell's start only while it waits for a controller: a missing
// Secret, TLS or callers', and a lost cluster wait for a person, and leave
// the TTL to the caller.
func TestRequeueAfterWaitsForPerson(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	since := metav1.NewTime(now.Add(-30 * time.Second))
	req := compose.Request{Input: &v1beta1.Input{}, Composite: map[string]any{}, Now: now}
	cases := map[string]struct {
		reason string
		want   time.Duration
	}{
		"TLSSecretMissing":         {reason: ReasonTLSSecretMissing, want: 0},
		"CallerSecretsMissing":     {reason: ReasonCallerSecretsMissing, want: 0},
		"ClusterAlreadyHasGateway": {reason: ReasonClusterAlreadyHasGateway, want: 0},
		"OldReplicasPresent":       {reason: ReasonOldReplicasPresent, want: compose.Backoff(since.Time, now)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := requeueAfter(req, compose.Condition{Type: ConditionType, Reason: tc.reason}, &since, time.Time{})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("requeueAfter(%s): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
