package harness

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// envoyPod is an Envoy pod of the suite's gateway, Ready or not, with AI
// Gateway's ext-proc sidecar or without.
func envoyPod(name string, ready, withSidecar bool) *unstructured.Unstructured {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: EnvoyGatewayNS, Labels: map[string]string{
			LabelOwningGatewayName: GatewayXRName, labelOwningGatewayNamespace: GatewayNS,
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "envoy"}}},
	}
	if withSidecar {
		p.Spec.InitContainers = []corev1.Container{{Name: sidecarName}}
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		panic(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// TestSidecarInvariant feeds the world ModelRoute and Envoy pod
// observations and compares what the sidecar invariant counted and found.
func TestSidecarInvariant(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 17, 12, 21, 0, time.UTC)
	type result struct {
		Observations, Violations int
		Unexercised              bool
	}
	cases := map[string]struct {
		steps []step
		want  result
	}{
		"AVerdictTrueBesideAPodWithoutTheSidecar": {
			steps: []step{
				{after: 0, status: "True", reason: "Routing", owners: byUpdate},
				{after: time.Second, pod: "p1", podReady: true},
			},
			want: result{Observations: 1, Violations: 1},
		},
		// Hole 3: a True users can see is a True users act on, replayed
		// or not.
		"AReplayedTrueBesideAPodWithoutTheSidecar": {
			steps: []step{
				{after: 0, status: "False", reason: "WaitingForGateway", owners: byUpdate},
				{after: 100 * time.Millisecond, pod: "p1", podReady: true},
				{after: time.Second, status: "True", reason: "Routing", owners: byApply},
				{after: time.Second + 5*time.Millisecond, status: "False", reason: "WaitingForGateway", owners: byUpdate},
			},
			want: result{Observations: 1, Violations: 1},
		},
		// Hole 3: the pod without the sidecar came and went while a
		// replayed True pended; the True stood, so it was the verdict all
		// that time.
		"APodWithoutTheSidecarWhileAReplayPended": {
			steps: []step{
				{after: 0, status: "False", reason: "WaitingForGateway", owners: byUpdate},
				{after: time.Second, status: "True", reason: "Routing", owners: byApply},
				{after: time.Second + 200*time.Millisecond, pod: "p1", podReady: true},
				{after: time.Second + 500*time.Millisecond, pod: "p1", podReady: true, podGone: true},
				{after: 3 * time.Second, read: true},
			},
			want: result{Observations: 1, Violations: 1},
		},
		// Hole 3: a route deleted while its True pended is not
		// RoutingReady afterwards, whatever the pending True became.
		"ADeletedRouteStaysGone": {
			steps: []step{
				{after: 0, status: "False", reason: "WaitingForGateway", owners: byUpdate},
				{after: time.Second, status: "True", reason: "Routing", owners: byApply},
				{after: time.Second + 10*time.Millisecond, deleted: true},
				{after: 3 * time.Second, read: true},
				{after: 4 * time.Second, pod: "p1", podReady: true},
			},
			// The replayed True was seen, never beside a Ready pod.
			want: result{Unexercised: true},
		},
		// Hole 5: only an observation with a route True and a Ready pod
		// could have failed; the others count for nothing.
		"OnlyObservationsThatCouldFailCount": {
			steps: []step{
				{after: 0, status: "True", reason: "Routing", owners: byUpdate},
				{after: 100 * time.Millisecond, pod: "p1"},
				{after: 200 * time.Millisecond, pod: "p1", podReady: true, podSidecar: true},
				{after: 300 * time.Millisecond, status: "False", reason: "WaitingForGateway", owners: byUpdate},
				{after: 400 * time.Millisecond, pod: "p2", podReady: true, podSidecar: true},
			},
			want: result{Observations: 1},
		},
		// Hole 5: routes were True, but never beside a Ready pod: the
		// invariant was never exercised.
		"RoutesTrueButNoReadyPod": {
			steps: []step{
				{after: 0, status: "True", reason: "Routing", owners: byUpdate},
				{after: 100 * time.Millisecond, pod: "p1", podSidecar: true},
				{after: 300 * time.Millisecond, status: "False", reason: "WaitingForGateway", owners: byUpdate},
				{after: 400 * time.Millisecond, pod: "p2", podReady: true, podSidecar: true},
			},
			want: result{Unexercised: true},
		},
		"NoRouteEverTrue": {
			steps: []step{
				{after: 0, status: "False", reason: "WaitingForGateway", owners: byUpdate},
				{after: 100 * time.Millisecond, pod: "p1", podReady: true},
			},
			want: result{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newTestWorld()
			run(w, t0, tc.steps)
			var got result
			got.Observations, got.Violations = w.SidecarSummary()
			got.Unexercised = w.SidecarUnexercised() != ""
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("sidecar invariant (-want +got):\n%s\nviolations: %q", diff, w.Violations)
			}
		})
	}
}
