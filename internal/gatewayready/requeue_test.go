package gatewayready

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
// the TTL to the caller. The back-off's steps are written out (a quarter of
// the spell, no less than a second and no more than ten seconds), not
// computed by the code under test.
func TestRequeueAfterWaitsForPerson(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	req := compose.Request{Input: (&v1beta1.Input{}).WithDefaults(), Composite: map[string]any{}, Now: now}
	cases := map[string]struct {
		reason string
		spell  time.Duration
		want   time.Duration
	}{
		"TLSSecretMissing":           {reason: ReasonTLSSecretMissing, spell: 30 * time.Second, want: 0},
		"CallerSecretsMissing":       {reason: ReasonCallerSecretsMissing, spell: 30 * time.Second, want: 0},
		"ClusterAlreadyHasGateway":   {reason: ReasonClusterAlreadyHasGateway, spell: 30 * time.Second, want: 0},
		"OldReplicasPresentAt3s":     {reason: ReasonOldReplicasPresent, spell: 3 * time.Second, want: time.Second},
		"OldReplicasPresentAt8s":     {reason: ReasonOldReplicasPresent, spell: 8 * time.Second, want: 2 * time.Second},
		"OldReplicasPresentAt30s":    {reason: ReasonOldReplicasPresent, spell: 30 * time.Second, want: 7500 * time.Millisecond},
		"OldReplicasPresentAt40s":    {reason: ReasonOldReplicasPresent, spell: 40 * time.Second, want: 10 * time.Second},
		"OldReplicasPresentAt10m":    {reason: ReasonOldReplicasPresent, spell: 10 * time.Minute, want: 10 * time.Second},
		"ListenersNotProgrammedAt1s": {reason: ReasonListenersNotProgrammed, spell: time.Second, want: time.Second},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			since := metav1.NewTime(now.Add(-tc.spell))
			got := RequeueAfter(req, compose.Condition{Type: ConditionType, Reason: tc.reason}, &since, time.Time{})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("RequeueAfter(%s, spell %s): -want, +got:\n%s", tc.reason, tc.spell, diff)
			}
		})
	}
}

// TestRequeueAfterFollowsRollout: while the breaker holds the gateway's
// events back (Responsive=False within the cooldown), a rollout is looked
// at every second, whatever the spell; other reasons, or a closed
// breaker, keep the back-off.
func TestRequeueAfterFollowsRollout(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	in := (&v1beta1.Input{}).WithDefaults()
	xr := func(open bool) map[string]any {
		status := "True"
		if open {
			status = "False"
		}
		return map[string]any{"status": map[string]any{"conditions": []any{map[string]any{
			"type": "Responsive", "status": status, "reason": "WatchCircuit", "lastTransitionTime": now.Add(-time.Minute).Format(time.RFC3339),
		}}}}
	}
	cases := map[string]struct {
		reason string
		open   bool
		spell  time.Duration
		want   time.Duration
	}{
		"OldReplicasHeldBack":       {reason: ReasonOldReplicasPresent, open: true, spell: 40 * time.Second, want: time.Second},
		"MarkerMissingHeldBack":     {reason: ReasonExtProcMarkerMissing, open: true, spell: 3 * time.Minute, want: time.Second},
		"NoReplicaHeldBack":         {reason: ReasonNoReplicaAvailable, open: true, spell: 10 * time.Second, want: time.Second},
		"DeploymentNotObservedHeld": {reason: ReasonDeploymentNotObserved, open: true, spell: 10 * time.Second, want: time.Second},
		"OldReplicasFlowing":        {reason: ReasonOldReplicasPresent, open: false, spell: 40 * time.Second, want: 10 * time.Second},
		"ListenersHeldBack":         {reason: ReasonListenersNotProgrammed, open: true, spell: 40 * time.Second, want: 10 * time.Second},
		"TLSSecretMissingHeldBack":  {reason: ReasonTLSSecretMissing, open: true, spell: 40 * time.Second, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := compose.Request{Input: in, Composite: xr(tc.open), Now: now}
			since := metav1.NewTime(now.Add(-tc.spell))
			got := RequeueAfter(req, compose.Condition{Type: ConditionType, Reason: tc.reason}, &since, time.Time{})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("RequeueAfter(%s, spell %s, breaker open %t): -want, +got:\n%s", tc.reason, tc.spell, tc.open, diff)
			}
		})
	}
}
