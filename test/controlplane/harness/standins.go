package harness

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// The stand-ins replace the two parts of a cluster this control plane has
// no binary for: the kubelet (no pod runs here) and a cloud's load
// balancer (loadBalancer, upstream.go). Each does only the part of
// its job the controllers depend on, and says in its comments what it
// leaves out. Everything else — Envoy Gateway, AI Gateway and its pod
// webhook, the Deployment and ReplicaSet controllers, the garbage
// collector, provider-kubernetes, CRD validation, Crossplane and the
// function — is the real thing.

// Labels Envoy Gateway puts on the Envoy Deployment and its pods
// (envoyproxy/gateway v1.8.3 internal/infrastructure/kubernetes/proxy,
// envoyLabels). AI Gateway finds the Deployment by the owning-gateway pair.
const (
	LabelOwningGatewayName      = "gateway.envoyproxy.io/owning-gateway-name"
	labelOwningGatewayNamespace = "gateway.envoyproxy.io/owning-gateway-namespace"
)

// loop runs reconcile whenever kick fires or every interval, until ctx
// ends. A failed reconcile is logged and tried again: a controller retries.
func loop(ctx context.Context, tb testing.TB, name string, kick <-chan struct{}, interval time.Duration, reconcile func(context.Context) error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var lastErr string
	for {
		if err := reconcile(ctx); err != nil && ctx.Err() == nil && err.Error() != lastErr {
			lastErr = err.Error()
			tb.Logf("%s stand-in: %v (retrying)", name, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-t.C:
		}
	}
}

// kicker is a channel that wakes a loop; kicks while it is busy coalesce.
type kicker chan struct{}

func newKicker() kicker { return make(kicker, 1) }

func (k kicker) kick() {
	select {
	case k <- struct{}{}:
	default:
	}
}

// Kubelet stands in for the kubelet of a node that runs every pod. There
// is no node: a pod is never bound (a bound pod would wait for a real
// kubelet to confirm its deletion and hang in Terminating), and the API
// server accepts status from us for an unbound pod. After startup, the
// time an Envoy takes to pass its readiness probe, it sets the pod Running
// with Initialized, ContainersReady and Ready True through the status
// subresource, which is what the ReplicaSet and Deployment controllers
// count as available (minReadySeconds is 0). While held, it starts no new
// pod, like a node that is slow to pull an image; pods already Ready stay
// Ready.
type Kubelet struct {
	c       *Cluster
	startup time.Duration
	kick    kicker

	mu          sync.Mutex
	hold        bool
	holdSidecar bool // hold only pods with the ext-proc sidecar
	seen        map[types.UID]time.Time
}

// SetHoldSidecar holds, or releases, only the pods that have AI Gateway's
// ext-proc sidecar: pods without it start, like a node that has the Envoy
// image but is still pulling the ext-proc one.
func (k *Kubelet) SetHoldSidecar(h bool) {
	k.mu.Lock()
	k.holdSidecar = h
	k.mu.Unlock()
	k.kick.kick()
}

// SetHold holds or releases pods that are not Ready yet.
func (k *Kubelet) SetHold(h bool) {
	k.mu.Lock()
	k.hold = h
	k.mu.Unlock()
	k.kick.kick()
}

func (k *Kubelet) reconcile(ctx context.Context) error {
	l, err := k.c.Dyn.Resource(GVRPod).Namespace(EnvoyGatewayNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("cannot list pods: %w", err)
	}
	pods := make([]corev1.Pod, len(l.Items))
	for i := range l.Items {
		if err := FromUnstructured(&l.Items[i], &pods[i]); err != nil {
			return err
		}
	}
	k.mu.Lock()
	hold, holdSidecar := k.hold, k.holdSidecar
	now := time.Now()
	var due []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp != nil || podReady(&p) {
			continue
		}
		first, ok := k.seen[p.UID]
		if !ok {
			k.seen[p.UID], first = now, now
		}
		if held := hold || (holdSidecar && Sidecar(&p) != nil); !held && now.Sub(first) >= k.startup {
			due = append(due, p)
		}
	}
	k.mu.Unlock()
	for i := range due {
		if err := k.start(ctx, &due[i]); err != nil {
			return err
		}
	}
	return nil
}

func (k *Kubelet) start(ctx context.Context, p *corev1.Pod) error {
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &now
	p.Status.Conditions = nil
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: new(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	u, err := toUnstructured(p, "v1", "Pod")
	if err != nil {
		return err
	}
	_, err = k.c.Dyn.Resource(GVRPod).Namespace(p.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("cannot start pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// StandIns are what runs beside the control plane: the real Envoy Gateway
// and AI Gateway controllers, and the two stand-ins left, the kubelet and
// the load balancer.
type StandIns struct {
	Up      *Upstream // the real Envoy Gateway and AI Gateway
	Kubelet *Kubelet  // the kubelet stand-in
	lb      *loadBalancer
}

// StartStandIns starts the real controllers (upstream.go) and the
// two stand-ins until the test ends. Watches on what each stand-in
// follows wake it; a timer covers the rest.
func (c *Cluster) StartStandIns(ctx context.Context, tb testing.TB) *StandIns {
	s := &StandIns{
		Up:      c.startUpstream(ctx),
		Kubelet: &Kubelet{c: c, startup: time.Second, kick: newKicker(), seen: map[types.UID]time.Time{}},
		lb:      &loadBalancer{c: c, kick: newKicker()},
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	tb.Cleanup(func() { cancel(); wg.Wait() })
	watchers := []struct {
		gvr   schema.GroupVersionResource
		kicks []kicker
	}{
		{GVRPod, []kicker{s.Kubelet.kick}},
		{gvrService, []kicker{s.lb.kick}},
	}
	for _, w := range watchers {
		wg.Go(func() { c.kickOnChange(ctx, w.gvr, w.kicks...) })
	}
	for _, r := range []struct {
		name     string
		kick     kicker
		interval time.Duration
		fn       func(context.Context) error
	}{
		{"kubelet", s.Kubelet.kick, 200 * time.Millisecond, s.Kubelet.reconcile},
		{"load balancer", s.lb.kick, 2 * time.Second, s.lb.reconcile},
	} {
		wg.Go(func() { loop(ctx, tb, r.name, r.kick, r.interval, r.fn) })
	}
	return s
}

// kickOnChange wakes the given loops on every change to a resource, and
// watches again whenever the watch ends.
func (c *Cluster) kickOnChange(ctx context.Context, gvr schema.GroupVersionResource, kicks ...kicker) {
	for ctx.Err() == nil {
		w, err := c.Dyn.Resource(gvr).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		for range w.ResultChan() {
			for _, k := range kicks {
				k.kick()
			}
		}
		w.Stop()
	}
}
