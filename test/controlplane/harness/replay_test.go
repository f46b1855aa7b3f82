package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// owner is one managedFields entry of a condition's status: a manager, its
// operation, and which fields of the condition it owns.
type owner struct {
	manager string
	op      metav1.ManagedFieldsOperationType
	fields  []string
}

// applier and updater own fields of a condition as Crossplane's status
// apply and its status update do.
func applier(fields ...string) owner {
	return owner{manager: xrStatusApplier, op: metav1.ManagedFieldsOperationApply, fields: fields}
}

func updater(fields ...string) owner {
	return owner{manager: "crossplane", op: metav1.ManagedFieldsOperationUpdate, fields: fields}
}

var (
	// The condition as only the apply changed it: a replay.
	byApply = []owner{applier(conditionFields...)}
	// The condition as the update wrote it, after an apply that changed
	// nothing or before any apply had conditions.
	byUpdate = []owner{updater(conditionFields...)}
	// An apply of the values the update wrote: every field shared.
	shared = []owner{applier(conditionFields...), updater(conditionFields...)}
	// A replay that changed the reason only: the apply shares the status,
	// whose value it did not change, with the update that wrote it, and
	// takes the fields it changed.
	reasonReplayed = []owner{applier(conditionFields...), updater("status")}
	// A verdict with the status a replay had just written, and another
	// reason: the update changed the reason, the message and the time, and
	// took them; the status it did not change stays the apply's alone.
	newReasonAfterReplay = []owner{applier("status"), updater("reason", "message", "lastTransitionTime")}
)

// routeWithOwners is the ModelRoute ns/r whose RoutingReady condition says
// status (reason), its fields owned as owners says, beside a manager of
// the main resource that owns nothing of the status.
func routeWithOwners(status, reason string, owners []owner) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"status": map[string]any{"conditions": []any{map[string]any{
			"type": "RoutingReady", "status": status, "reason": reason, "message": "m", "lastTransitionTime": "2026-12-02T17:12:21Z",
		}}},
	}}
	u.SetNamespace("ns")
	u.SetName("r")
	var mfs []metav1.ManagedFieldsEntry
	for _, o := range owners {
		fs := []string{`".":{}`, `"f:type":{}`}
		for _, f := range o.fields {
			fs = append(fs, `"f:`+f+`":{}`)
		}
		raw := `{"f:status":{"f:conditions":{"k:{\"type\":\"RoutingReady\"}":{` + strings.Join(fs, ",") + `}}}}`
		mfs = append(mfs, metav1.ManagedFieldsEntry{Manager: o.manager, Operation: o.op, Subresource: "status", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(raw)})
	}
	mfs = append(mfs, metav1.ManagedFieldsEntry{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:gatewayName":{}}}`)})
	u.SetManagedFields(mfs)
	return u
}

func TestReplayed(t *testing.T) {
	cases := map[string]struct {
		u    *unstructured.Unstructured
		want bool
	}{
		"OnlyTheApplierChangedIt":  {u: routeWithOwners("False", "GatewayStatusStale", byApply), want: true},
		"CrossplanesUpdateWroteIt": {u: routeWithOwners("True", "Routing", byUpdate)},
		"AnApplyOfTheSameValue":    {u: routeWithOwners("True", "Routing", shared)},
		"AReplayOfTheReasonOnly":   {u: routeWithOwners("False", "WaitingForGateway", reasonReplayed), want: true},
		// The update wrote the reason after the apply wrote the status:
		// the update came last, the condition is its verdict.
		"TheUpdateWroteTheReasonAfterTheApply": {u: routeWithOwners("False", "GatewayStatusStale", newReasonAfterReplay)},
		"TheUpdateWroteTheTimeOnly":            {u: routeWithOwners("False", "GatewayStatusStale", []owner{applier("status", "reason", "message"), updater("lastTransitionTime")})},
		"NoManagedFields":                      {u: routeWithOwners("True", "Routing", nil)},
		"NoObject":                             {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Replayed(tc.u, "RoutingReady"); got != tc.want {
				t.Errorf("replayed() = %v, want %v", got, tc.want)
			}
		})
	}
}

// step is one thing that happens to the world in a unit test: an
// observation of the ModelRoute ns/r (status set), its deletion, a check
// that reads the recorded transitions (read), the end of a check window
// (windowEnd: the check waits the pending replays out, then reads), or an
// observation of an Envoy pod of the gateway (pod set).
type step struct {
	after          time.Duration
	status, reason string
	owners         []owner
	deleted        bool
	read           bool
	windowEnd      bool

	pod                           string
	podReady, podSidecar, podGone bool
}

// run feeds the steps to w as the watch and the checks would.
func run(w *World, t0 time.Time, steps []step) (waited []time.Duration) {
	for _, s := range steps {
		now := t0.Add(s.after)
		switch {
		case s.pod != "":
			w.onPod(envoyPod(s.pod, s.podReady, s.podSidecar), s.podGone)
		case s.deleted:
			// What onDelete does with a ModelRoute's deletion, at now.
			w.Mu.Lock()
			w.routeDeletedLocked("ns/r", now)
			w.Mu.Unlock()
		case s.read:
			w.Mu.Lock()
			w.promoteLocked(now)
			w.Mu.Unlock()
		case s.windowEnd:
			w.Mu.Lock()
			d := w.replayWaitLocked(now, now)
			w.promoteLocked(now.Add(d))
			w.Mu.Unlock()
			waited = append(waited, d)
		default:
			// What onChange does with a ModelRoute's event.
			w.onRoute(routeWithOwners(s.status, s.reason, s.owners), now)
			w.Mu.Lock()
			w.checkSidecarLocked()
			w.Mu.Unlock()
		}
	}
	return waited
}

// newTestWorld is a world that watches nothing, for the unit tests.
func newTestWorld() *World {
	return &World{Timeline: &Timeline{}, byRoute: map[string][]Transition{}, pending: map[string]*pendingReplay{},
		sidecar: sidecarState{pods: map[string]*corev1.Pod{}, routingReady: map[string]bool{}, replayedTrue: map[string]bool{}, reported: map[string]bool{}}}
}

// TestJudge feeds the world a ModelRoute's RoutingReady as the watch sees
// it, one observation at a time, and compares what it records.
func TestJudge(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 17, 12, 21, 0, time.UTC)
	type rec struct {
		At             time.Duration
		Status, Reason string
	}
	cases := map[string]struct {
		steps       []step
		want        []rec
		wantReplays []Replay
		wantWaited  []time.Duration
	}{
		"AReplayCrossplanesUpdateUndoes": {
			// The 5f flicker: True, then the apply of a reconcile that
			// started from a stale cache writes the GatewayStatusStale
			// of one reconcile ago, then its update puts True back.
			steps: []step{
				{after: 0, status: "False", reason: "GatewayStatusStale", owners: byUpdate},
				{after: 100 * time.Millisecond, status: "True", reason: "Routing", owners: byUpdate},
				{after: 500 * time.Millisecond, status: "False", reason: "GatewayStatusStale", owners: byApply},
				{after: 505 * time.Millisecond, status: "True", reason: "Routing", owners: byUpdate},
				{after: 10 * time.Second, read: true},
			},
			want:        []rec{{0, "False", "GatewayStatusStale"}, {100 * time.Millisecond, "True", "Routing"}},
			wantReplays: []Replay{{At: t0.Add(500 * time.Millisecond), XR: "ns/r", CondType: "RoutingReady", Status: "False", Reason: "GatewayStatusStale", Over: 5 * time.Millisecond}},
		},
		"AChangeCrossplanesUpdateWrote": {
			steps: []step{
				{after: 0, status: "True", reason: "Routing", owners: shared},
				{after: time.Second, status: "False", reason: "WaitingForGateway", owners: byUpdate},
			},
			want: []rec{{0, "True", "Routing"}, {time.Second, "False", "WaitingForGateway"}},
		},
		"AnApplyThatChangedNothing": {
			steps: []step{
				{after: 0, status: "True", reason: "Routing", owners: byUpdate},
				{after: time.Second, status: "True", reason: "Routing", owners: shared},
			},
			want: []rec{{0, "True", "Routing"}},
		},
		"AReplayOfAReasonWhileFalse": {
			steps: []step{
				{after: 0, status: "False", reason: "WaitingForGateway", owners: byUpdate},
				{after: time.Second, status: "False", reason: "GatewayStatusStale", owners: byUpdate},
				{after: 2 * time.Second, status: "False", reason: "WaitingForGateway", owners: reasonReplayed},
				{after: 2*time.Second + 10*time.Millisecond, status: "False", reason: "GatewayStatusStale", owners: byUpdate},
			},
			want:        []rec{{0, "False", "WaitingForGateway"}, {time.Second, "False", "GatewayStatusStale"}},
			wantReplays: []Replay{{At: t0.Add(2 * time.Second), XR: "ns/r", CondType: "RoutingReady", Status: "False", Reason: "WaitingForGateway", Over: 10 * time.Millisecond}},
		},
		// Hole 1: the verdict keeps the status the replay wrote and gives
		// another reason; the update owns the reason, the apply still the
		// status. Judged by the status alone, it was another replay.
		"ANewReasonAfterAReplay": {
			steps: []step{
				{after: 0, status: "True", reason: "Routing", owners: byUpdate},
				{after: time.Second, status: "False", reason: "WaitingForGateway", owners: byApply},
				{after: time.Second + 5*time.Millisecond, status: "False", reason: "GatewayStatusStale", owners: newReasonAfterReplay},
				{after: 2 * time.Second, read: true},
			},
			want:        []rec{{0, "True", "Routing"}, {time.Second + 5*time.Millisecond, "False", "GatewayStatusStale"}},
			wantReplays: []Replay{{At: t0.Add(time.Second), XR: "ns/r", CondType: "RoutingReady", Status: "False", Reason: "WaitingForGateway", Over: 5 * time.Millisecond}},
		},
		// Hole 2: the function's verdict equals what was replayed (it
		// computed it from the same stale inputs), its update changes
		// nothing, and the apply stays the only writer. Past the bound it
		// is the verdict, recorded at its first sighting.
		"AReplayThatStoodIsTheVerdict": {
			steps: []step{
				{after: 0, status: "True", reason: "Routing", owners: byUpdate},
				{after: time.Second, status: "False", reason: "WaitingForGateway", owners: byApply},
				{after: time.Second + ReplayBound/2, status: "False", reason: "WaitingForGateway", owners: byApply},
				{after: time.Second + ReplayBound + time.Millisecond, status: "False", reason: "WaitingForGateway", owners: byApply},
				{after: 2*time.Second + ReplayBound, status: "False", reason: "WaitingForGateway", owners: byApply},
			},
			want:        []rec{{0, "True", "Routing"}, {time.Second, "False", "WaitingForGateway"}},
			wantReplays: []Replay{{At: t0.Add(time.Second), XR: "ns/r", CondType: "RoutingReady", Status: "False", Reason: "WaitingForGateway", Over: ReplayBound + time.Millisecond, Stood: true}},
		},
		"AReplayThatStoodAndNoEventCame": {
			steps: []step{
				{after: 0, status: "True", reason: "Routing", owners: byUpdate},
				{after: time.Second, status: "False", reason: "WaitingForGateway", owners: byApply},
				{after: time.Second + ReplayBound/2, read: true},
				{after: time.Second + 2*ReplayBound, read: true},
			},
			want:        []rec{{0, "True", "Routing"}, {time.Second, "False", "WaitingForGateway"}},
			wantReplays: []Replay{{At: t0.Add(time.Second), XR: "ns/r", CondType: "RoutingReady", Status: "False", Reason: "WaitingForGateway", Over: 2 * ReplayBound, Stood: true}},
		},
		// Hole 2: a replay the next event ends after it stood past the
		// bound was a verdict all the same.
		"AReplayEndedAfterTheBound": {
			steps: []step{
				{after: 0, status: "True", reason: "Routing", owners: byUpdate},
				{after: time.Second, status: "False", reason: "WaitingForGateway", owners: byApply},
				{after: time.Second + ReplayBound + 500*time.Millisecond, status: "True", reason: "Routing", owners: byUpdate},
			},
			want:        []rec{{0, "True", "Routing"}, {time.Second, "False", "WaitingForGateway"}, {time.Second + ReplayBound + 500*time.Millisecond, "True", "Routing"}},
			wantReplays: []Replay{{At: t0.Add(time.Second), XR: "ns/r", CondType: "RoutingReady", Status: "False", Reason: "WaitingForGateway", Over: ReplayBound + 500*time.Millisecond, Stood: true}},
		},
		"AReplayEndedWithinTheBound": {
			steps: []step{
				{after: 0, status: "True", reason: "Routing", owners: byUpdate},
				{after: time.Second, status: "False", reason: "WaitingForGateway", owners: byApply},
				{after: time.Second + ReplayBound - time.Millisecond, status: "True", reason: "Routing", owners: byUpdate},
			},
			want:        []rec{{0, "True", "Routing"}},
			wantReplays: []Replay{{At: t0.Add(time.Second), XR: "ns/r", CondType: "RoutingReady", Status: "False", Reason: "WaitingForGateway", Over: ReplayBound - time.Millisecond}},
		},
		// Hole 4: a check window ends while a replay pends: the check
		// waits until the replay has stood past the bound, and then it
		// is the verdict the check reads.
		"AReplayPendingAtTheEndOfAWindow": {
			steps: []step{
				{after: 0, status: "True", reason: "Routing", owners: byUpdate},
				{after: time.Second, status: "False", reason: "WaitingForGateway", owners: byApply},
				{after: time.Second + 200*time.Millisecond, windowEnd: true},
			},
			want:        []rec{{0, "True", "Routing"}, {time.Second, "False", "WaitingForGateway"}},
			wantReplays: []Replay{{At: t0.Add(time.Second), XR: "ns/r", CondType: "RoutingReady", Status: "False", Reason: "WaitingForGateway", Over: ReplayBound + time.Millisecond, Stood: true}},
			wantWaited:  []time.Duration{ReplayBound - 200*time.Millisecond + time.Millisecond},
		},
		"NoReplayPendingAtTheEndOfAWindow": {
			steps: []step{
				{after: 0, status: "True", reason: "Routing", owners: byUpdate},
				{after: time.Second, windowEnd: true},
			},
			want:       []rec{{0, "True", "Routing"}},
			wantWaited: []time.Duration{0},
		},
		// A replay of a ModelRoute deleted before the bound is not a
		// verdict; one that stood past it was.
		"AReplayOfADeletedRoute": {
			steps: []step{
				{after: 0, status: "True", reason: "Routing", owners: byUpdate},
				{after: time.Second, status: "False", reason: "WaitingForGateway", owners: byApply},
				{after: time.Second + 10*time.Millisecond, deleted: true},
				{after: 10 * time.Second, read: true},
			},
			want:        []rec{{0, "True", "Routing"}},
			wantReplays: []Replay{{At: t0.Add(time.Second), XR: "ns/r", CondType: "RoutingReady", Status: "False", Reason: "WaitingForGateway", Over: 10 * time.Millisecond}},
		},
		"AReplayOfARouteDeletedAfterTheBound": {
			steps: []step{
				{after: 0, status: "True", reason: "Routing", owners: byUpdate},
				{after: time.Second, status: "False", reason: "WaitingForGateway", owners: byApply},
				{after: time.Second + ReplayBound + time.Millisecond, deleted: true},
				{after: 10 * time.Second, read: true},
			},
			want:        []rec{{0, "True", "Routing"}, {time.Second, "False", "WaitingForGateway"}},
			wantReplays: []Replay{{At: t0.Add(time.Second), XR: "ns/r", CondType: "RoutingReady", Status: "False", Reason: "WaitingForGateway", Over: ReplayBound + time.Millisecond, Stood: true}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newTestWorld()
			waited := run(w, t0, tc.steps)
			got := []rec{}
			for _, tr := range w.byRoute["ns/r"] {
				got = append(got, rec{At: tr.At.Sub(t0), Status: tr.Status, Reason: tr.Reason})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("recorded transitions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantReplays, w.replays, cmp.AllowUnexported(Replay{})); diff != "" {
				t.Errorf("replays (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWaited, waited); diff != "" {
				t.Errorf("waits at the end of a window (-want +got):\n%s", diff)
			}
		})
	}
}
