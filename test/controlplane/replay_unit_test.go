package controlplane

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// routeWithOwners is a ModelRoute whose RoutingReady condition says
// status (reason), with the status fields of that condition owned as
// owners says: one managedFields entry per manager, "Apply" or "Update".
func routeWithOwners(status, reason string, owners map[string]metav1.ManagedFieldsOperationType) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"status": map[string]any{"conditions": []any{map[string]any{
			"type": "RoutingReady", "status": status, "reason": reason, "message": "m", "lastTransitionTime": "2026-12-02T17:12:21Z",
		}}},
	}}
	fields := `{"f:status":{"f:conditions":{"k:{\"type\":\"RoutingReady\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}}}}}`
	var mfs []metav1.ManagedFieldsEntry
	for m, op := range owners {
		mfs = append(mfs, metav1.ManagedFieldsEntry{Manager: m, Operation: op, Subresource: "status", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)})
	}
	// A manager of the main resource that owns nothing of the status.
	mfs = append(mfs, metav1.ManagedFieldsEntry{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:gatewayName":{}}}`)})
	u.SetManagedFields(mfs)
	return u
}

var (
	byApply  = map[string]metav1.ManagedFieldsOperationType{xrStatusApplier: metav1.ManagedFieldsOperationApply}
	byUpdate = map[string]metav1.ManagedFieldsOperationType{"crossplane": metav1.ManagedFieldsOperationUpdate}
	shared   = map[string]metav1.ManagedFieldsOperationType{xrStatusApplier: metav1.ManagedFieldsOperationApply, "crossplane": metav1.ManagedFieldsOperationUpdate}
)

func TestAppliedOnly(t *testing.T) {
	cases := map[string]struct {
		u    *unstructured.Unstructured
		want bool
	}{
		"OnlyTheApplierChangedIt":  {u: routeWithOwners("False", "GatewayStatusStale", byApply), want: true},
		"CrossplanesUpdateWroteIt": {u: routeWithOwners("True", "Routing", byUpdate)},
		"AnApplyOfTheSameValue":    {u: routeWithOwners("True", "Routing", shared)},
		"NoManagedFields":          {u: routeWithOwners("True", "Routing", nil)},
		"NoObject":                 {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := appliedOnly(tc.u, "RoutingReady", "status"); got != tc.want {
				t.Errorf("appliedOnly() = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestJudge feeds the world a ModelRoute's RoutingReady as the watch sees
// it, one observation at a time, and compares what it records.
func TestJudge(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 17, 12, 21, 0, time.UTC)
	type obs struct {
		after          time.Duration
		status, reason string
		owners         map[string]metav1.ManagedFieldsOperationType
	}
	type judged struct {
		Verdict, Record bool
		At              time.Duration
	}
	cases := map[string]struct {
		seen        []obs
		want        []judged
		wantReplays []replay
	}{
		"AReplayCrossplanesUpdateUndoes": {
			// The 5f flicker: True, then the apply of a reconcile that
			// started from a stale cache writes the GatewayStatusStale
			// of one reconcile ago, then its update puts True back.
			seen: []obs{
				{0, "False", "GatewayStatusStale", byUpdate},
				{100 * time.Millisecond, "True", "Routing", byUpdate},
				{500 * time.Millisecond, "False", "GatewayStatusStale", byApply},
				{505 * time.Millisecond, "True", "Routing", byUpdate},
			},
			want:        []judged{{true, true, 0}, {true, true, 100 * time.Millisecond}, {false, false, 0}, {true, false, 0}},
			wantReplays: []replay{{at: t0.Add(500 * time.Millisecond), xr: "ns/r", condType: "RoutingReady", status: "False", reason: "GatewayStatusStale", over: 5 * time.Millisecond}},
		},
		"AChangeCrossplanesUpdateWrote": {
			seen: []obs{
				{0, "True", "Routing", shared},
				{time.Second, "False", "WaitingForGateway", byUpdate},
			},
			want: []judged{{true, true, 0}, {true, true, time.Second}},
		},
		"AnApplyThatChangedNothing": {
			seen: []obs{
				{0, "True", "Routing", byUpdate},
				{time.Second, "True", "Routing", shared},
			},
			want: []judged{{true, true, 0}, {true, false, 0}},
		},
		"AReplayThatStoodIsTheVerdict": {
			// The function's verdict equals what was replayed: its update
			// changes nothing, and the apply stays the field's last writer.
			seen: []obs{
				{0, "True", "Routing", byUpdate},
				{time.Second, "False", "WaitingForGateway", byApply},
				{time.Second + replayGrace/2, "False", "WaitingForGateway", byApply},
				{time.Second + replayGrace, "False", "WaitingForGateway", byApply},
				{2*time.Second + replayGrace, "False", "WaitingForGateway", byApply},
			},
			want:        []judged{{true, true, 0}, {false, false, 0}, {false, false, 0}, {true, true, time.Second}, {true, false, 0}},
			wantReplays: []replay{{at: t0.Add(time.Second), xr: "ns/r", condType: "RoutingReady", status: "False", reason: "WaitingForGateway", over: replayGrace, stood: true}},
		},
		"AReplayOfAReasonWhileFalse": {
			seen: []obs{
				{0, "False", "WaitingForGateway", byUpdate},
				{time.Second, "False", "GatewayStatusStale", byUpdate},
				{2 * time.Second, "False", "WaitingForGateway", map[string]metav1.ManagedFieldsOperationType{xrStatusApplier: metav1.ManagedFieldsOperationApply}},
				{2*time.Second + 10*time.Millisecond, "False", "GatewayStatusStale", byUpdate},
			},
			want:        []judged{{true, true, 0}, {true, true, time.Second}, {false, false, 0}, {true, false, 0}},
			wantReplays: []replay{{at: t0.Add(2 * time.Second), xr: "ns/r", condType: "RoutingReady", status: "False", reason: "WaitingForGateway", over: 10 * time.Millisecond}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := &world{pending: map[string]*pendingReplay{}}
			var recorded []transition
			got := make([]judged, 0, len(tc.seen))
			for _, o := range tc.seen {
				now := t0.Add(o.after)
				cur := transition{at: now, status: o.status, reason: o.reason, message: "m"}
				var last *transition
				if n := len(recorded); n > 0 {
					last = &recorded[n-1]
				}
				v, r := w.judgeLocked("ns/r", "RoutingReady", last, &cur, routeWithOwners(o.status, o.reason, o.owners), now)
				j := judged{Verdict: v, Record: r}
				if r {
					recorded = append(recorded, cur)
					j.At = cur.at.Sub(t0)
				}
				got = append(got, j)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("judgements (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantReplays, w.replays, cmp.AllowUnexported(replay{})); diff != "" {
				t.Errorf("replays (-want +got):\n%s", diff)
			}
		})
	}
}
