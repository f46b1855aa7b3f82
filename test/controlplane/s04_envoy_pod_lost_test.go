package controlplane

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// envoyPodLost is scenario 4: one of two Envoy pods goes (eviction, node
// drain). The ReplicaSet replaces it from the current template, so no
// old-template pod ever serves: GatewayReady and RoutingReady must stay
// True the whole time. The replacement is held, like a pod waiting for its
// image, until the function has reported the degraded Deployment (one of
// two available) on the InferenceGateway, so the function surely judged
// that state and did not just sleep through it; then it may start. The
// XRs are sampled every 100 ms, on top of every watch event the world
// records.
func (sc *scenarios) envoyPodLost(t *testing.T) {
	c, s := sc.c, sc.s
	pods, err := c.Dyn.Resource(harness.GVRPod).Namespace(harness.EnvoyGatewayNS).List(sc.ctx, metav1.ListOptions{LabelSelector: harness.LabelOwningGatewayName + "=" + harness.GatewayXRName})
	harness.Must(t, err)
	before := map[string]bool{}
	var victim string
	for _, p := range pods.Items {
		before[p.GetName()] = true
		if victim == "" && p.GetDeletionTimestamp() == nil {
			victim = p.GetName()
		}
	}
	if victim == "" {
		t.Fatalf("no Envoy pod to delete")
	}
	want := harness.Int64At(sc.envoyDeployment(sc.ctx).Object, "spec", "replicas")
	// Start from quiet XRs. Right after a condition changes, Crossplane
	// v2.2 can write the previous conditions back for a moment: each
	// reconcile server-side applies the XR's status together with the
	// conditions it read at its start (composite/composition_functions.go),
	// and a reconcile queued by the previous one's status patch may start
	// from a cache that lacks that one's final condition update. Such a
	// blip belongs to the transition before this scenario, not to the pod.
	sc.eventually(t, waitSettle, "both XRs True with no condition change for 10s", func(ctx context.Context) string {
		if msg := wantCondition(sc.gatewayXR(ctx), gateway.ConditionType, "True"); msg != "" {
			return msg
		}
		if msg := wantCondition(sc.routeXR(ctx), "RoutingReady", "True"); msg != "" {
			return msg
		}
		if since := time.Since(sc.w.LastTransition()); since < 10*time.Second {
			return fmt.Sprintf("the last condition change was %s ago", since.Round(time.Millisecond))
		}
		return ""
	})
	// A replay pending now belongs to the time before the window.
	sc.w.AwaitReplays(sc.ctx, time.Now())
	gwBefore, rtBefore := sc.w.Transitions()
	s.Kubelet.SetHold(true)
	start := time.Now()
	harness.Must(t, c.Dyn.Resource(harness.GVRPod).Namespace(harness.EnvoyGatewayNS).Delete(sc.ctx, victim, metav1.DeleteOptions{}))
	t.Logf("deleted Envoy pod %s; its replacement is held", victim)

	samples := 0
	var degraded, released, whole time.Time
	var seen string
	for {
		xr, mr := sc.gatewayXR(sc.ctx), sc.routeXR(sc.ctx)
		samples++
		if st := harness.ConditionStatus(xr, gateway.ConditionType); st != "True" {
			t.Errorf("%.2fs after the pod was deleted: GatewayReady=%s (%s)", time.Since(start).Seconds(), st, harness.ConditionReason(xr, gateway.ConditionType))
		}
		if st := harness.ConditionStatus(mr, "RoutingReady"); st != "True" {
			t.Errorf("%.2fs after the pod was deleted: RoutingReady=%s (%s)", time.Since(start).Seconds(), st, harness.ConditionReason(mr, "RoutingReady"))
		}
		r, _, _ := unstructured.NestedMap(xr.Object, "status", "rollout")
		switch {
		case degraded.IsZero():
			// The function has judged the Deployment with a pod short.
			if harness.Int64At(r, "availableReplicas") < want && harness.Int64At(r, "replicas") == want && harness.Int64At(r, "updatedReplicas") == want {
				degraded, seen = time.Now(), fmt.Sprint(r)
				s.Kubelet.SetHold(false)
				released = time.Now()
			}
		case whole.IsZero():
			// Whole again: a new pod is Ready in place of the victim, and
			// the function has reported all replicas available.
			if sc.replacedBy(before, victim, want) && harness.Int64At(r, "availableReplicas") == want {
				whole = time.Now()
			}
		case time.Since(whole) > 10*time.Second:
			sc.w.AwaitReplays(sc.ctx, time.Now())
			gwAfter, rtAfter := sc.w.Transitions()
			if len(gwAfter) != len(gwBefore) || len(rtAfter) != len(rtBefore) {
				t.Errorf("conditions changed while a pod was replaced:\nGatewayReady:\n%sRoutingReady:\n%s",
					harness.FormatTransitions(start, gwAfter[len(gwBefore):]), harness.FormatTransitions(start, rtAfter[len(rtBefore):]))
			}
			t.Logf("%d samples over %s; the function reported the degraded Deployment (%s) %s after the deletion, GatewayReady=True; "+
				"the replacement started at %s and the function reported it whole at %s",
				samples, time.Since(start).Round(time.Millisecond), seen, degraded.Sub(start).Round(time.Millisecond),
				released.Sub(start).Round(time.Millisecond), whole.Sub(start).Round(time.Millisecond))
			sc.agree(t)
			sc.noDeletions(t)
			sc.w.Check(t)
			return
		}
		if time.Since(start) > 2*waitSettle {
			s.Kubelet.SetHold(false)
			t.Fatalf("gave up %s after the pod was deleted: degraded reported at %v, whole at %v; status.rollout %v", 2*waitSettle, degraded, whole, r)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// replacedBy reports whether the victim is gone, a pod that was not there
// before is Ready, and the Envoy Deployment has all its replicas available.
func (sc *scenarios) replacedBy(before map[string]bool, victim string, want int64) bool {
	if _, err := sc.get(sc.ctx, harness.GVRPod, harness.EnvoyGatewayNS, victim); !apierrors.IsNotFound(err) {
		return false
	}
	d := sc.envoyDeployment(sc.ctx)
	if harness.Int64At(d.Object, "status", "availableReplicas") != want || harness.Int64At(d.Object, "status", "replicas") != want {
		return false
	}
	pods, err := sc.c.Dyn.Resource(harness.GVRPod).Namespace(harness.EnvoyGatewayNS).List(sc.ctx, metav1.ListOptions{LabelSelector: harness.LabelOwningGatewayName + "=" + harness.GatewayXRName})
	if err != nil {
		return false
	}
	for _, p := range pods.Items {
		if !before[p.GetName()] && harness.ConditionStatus(&p, "Ready") == "True" {
			return true
		}
	}
	return false
}
