package controlplane

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// The stand-ins replace the three controllers this control plane has no
// binary for: Envoy Gateway, Envoy AI Gateway and the kubelet. Each does
// only the part of its upstream's job that the function's readiness rule
// depends on, the way upstream does it, and says in its comments what it
// leaves out. Everything else — the Deployment and ReplicaSet controllers,
// the garbage collector, provider-kubernetes, CRD validation, Crossplane
// and the function — is the real thing.

// Labels Envoy Gateway puts on the Envoy Deployment and its pods
// (envoyproxy/gateway v1.8.1 internal/infrastructure/kubernetes/proxy,
// envoyLabels). AI Gateway finds the Deployment by the owning-gateway pair.
const (
	labelOwningGatewayName      = "gateway.envoyproxy.io/owning-gateway-name"
	labelOwningGatewayNamespace = "gateway.envoyproxy.io/owning-gateway-namespace"

	// markerConfigHash is the pod-template annotation AI Gateway v1.1.0
	// writes with a hash of the ext-proc injection inputs
	// (internal/controller/gateway.go). Written out here, not taken from
	// the function's Input defaults, so that a wrong key there fails the
	// suite instead of agreeing with itself.
	markerConfigHash = "aigateway.envoyproxy.io/extproc-config-hash"
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

// envoyGateway stands in for Envoy Gateway v1.8. For each Gateway of the
// envoy GatewayClass whose infrastructure.parametersRef names an
// EnvoyProxy in the Gateway's namespace, it server-side applies the Envoy
// Deployment in envoy-gateway-system (ControllerNamespace mode): the name
// from envoyDeployment.name, or Envoy Gateway's hashed default; replicas
// from envoyDeployment.replicas; the RollingUpdate strategy with
// Kubernetes' default surge and unavailability; and the owning-gateway
// labels. It sets the Gateway's status.addresses as if the LoadBalancer
// Service had an address at once, and Programmed when the Deployment has
// an available replica (internal/gatewayapi/status/gateway.go,
// updateGatewayProgrammedCondition). It writes status.ancestors on traffic
// policies and status.parents on HTTPRoutes (routes_test.go, policyStatus
// and routeStatus), and judges SecurityPolicies by Envoy Gateway's rules
// (securitypolicy_test.go). It leaves out the Service, ServiceAccount, PDB, HPA,
// xDS and everything about traffic; it never deletes a Deployment.
type envoyGateway struct {
	c       *cluster
	address string
	kick    kicker
}

func (e *envoyGateway) reconcile(ctx context.Context) error {
	gws, err := e.c.dyn.Resource(gvrGateway).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("cannot list Gateways: %w", err)
	}
	for i := range gws.Items {
		if err := e.gateway(ctx, &gws.Items[i]); err != nil {
			return err
		}
	}
	ours, err := e.egGateways(ctx, gws.Items)
	if err != nil {
		return err
	}
	if err := e.policyStatus(ctx, ours); err != nil {
		return err
	}
	return e.routeStatus(ctx, ours)
}

func (e *envoyGateway) gateway(ctx context.Context, gw *unstructured.Unstructured) error {
	if gw.GetDeletionTimestamp() != nil {
		return nil
	}
	className, _, _ := unstructured.NestedString(gw.Object, "spec", "gatewayClassName")
	class, err := e.c.dyn.Resource(gvrGatewayClass).Get(ctx, className, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot get GatewayClass %s: %w", className, err)
	}
	if ctrl, _, _ := unstructured.NestedString(class.Object, "spec", "controllerName"); ctrl != egControllerName {
		return nil
	}
	ref, _, _ := unstructured.NestedStringMap(gw.Object, "spec", "infrastructure", "parametersRef")
	if ref["group"] != "gateway.envoyproxy.io" || ref["kind"] != "EnvoyProxy" {
		return nil
	}
	ep, err := e.c.dyn.Resource(gvrEnvoyProxy).Namespace(gw.GetNamespace()).Get(ctx, ref["name"], metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot get EnvoyProxy %s/%s: %w", gw.GetNamespace(), ref["name"], err)
	}
	name, _, _ := unstructured.NestedString(ep.Object, "spec", "provider", "kubernetes", "envoyDeployment", "name")
	if name == "" {
		name = "envoy-" + hashedName(gw.GetNamespace()+"/"+gw.GetName(), 48)
	}
	replicas := int64(1) // nil replicas: the Kubernetes default
	if _, ok, _ := unstructured.NestedFieldNoCopy(ep.Object, "spec", "provider", "kubernetes", "envoyDeployment", "replicas"); ok {
		replicas = int64At(ep.Object, "spec", "provider", "kubernetes", "envoyDeployment", "replicas")
	}
	labels := map[string]any{
		"app.kubernetes.io/name":       "envoy",
		"app.kubernetes.io/component":  "proxy",
		"app.kubernetes.io/managed-by": "envoy-gateway",
		labelOwningGatewayName:         gw.GetName(),
		labelOwningGatewayNamespace:    gw.GetNamespace(),
	}
	// Only the fields Envoy Gateway sets: the API server defaults the rest,
	// and RollingUpdate's 25% surge and unavailability are Kubernetes'
	// defaults, which Envoy Gateway keeps unless the EnvoyProxy says
	// otherwise.
	dep := map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata":   map[string]any{"name": name, "namespace": envoyGatewayNS, "labels": labels},
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": labels},
			"strategy": map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": "25%", "maxUnavailable": "25%"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec":     envoyPodSpec(ep),
			},
		},
	}
	// Server-side apply under Envoy Gateway's own field manager, as EG
	// does: the ext-proc marker AI Gateway merge-patches into the template
	// belongs to another manager, so re-applying never removes it.
	u, err := e.c.dyn.Resource(gvrDeployment).Namespace(envoyGatewayNS).Apply(ctx, name, &unstructured.Unstructured{Object: dep},
		metav1.ApplyOptions{FieldManager: "envoy-gateway", Force: true})
	if err != nil {
		return fmt.Errorf("cannot apply Deployment %s/%s: %w", envoyGatewayNS, name, err)
	}
	cur := &appsv1.Deployment{}
	if err := fromUnstructured(u, cur); err != nil {
		return err
	}
	return e.status(ctx, gw, cur)
}

// status writes the Gateway's address and Programmed condition if they
// differ from what is there.
func (e *envoyGateway) status(ctx context.Context, gw *unstructured.Unstructured, dep *appsv1.Deployment) error {
	programmed := metav1.ConditionFalse
	reason, msg := "NoResources", "Deployment replicas unavailable"
	if dep.Status.AvailableReplicas > 0 {
		programmed, reason = metav1.ConditionTrue, "Programmed"
		msg = fmt.Sprintf("Address assigned to the Gateway, %d/%d envoy replicas available", dep.Status.AvailableReplicas, dep.Status.Replicas)
	}
	addrs, _, _ := unstructured.NestedSlice(gw.Object, "status", "addresses")
	if len(addrs) == 1 && conditionStatus(gw, "Programmed") == string(programmed) &&
		conditionStatus(gw, "Accepted") == "True" && condition(gw, "Programmed")["message"] == msg {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := e.c.dyn.Resource(gvrGateway).Namespace(gw.GetNamespace()).Get(ctx, gw.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := time.Now().UTC().Format(time.RFC3339)
		if err := unstructured.SetNestedSlice(cur.Object, []any{map[string]any{"type": "IPAddress", "value": e.address}}, "status", "addresses"); err != nil {
			return err
		}
		for _, c := range []map[string]any{
			{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "The Gateway has been scheduled by Envoy Gateway"},
			{"type": "Programmed", "status": string(programmed), "reason": reason, "message": msg},
		} {
			if old := condition(cur, c["type"].(string)); old != nil && old["status"] == c["status"] {
				c["lastTransitionTime"] = old["lastTransitionTime"]
			} else {
				c["lastTransitionTime"] = now
			}
			c["observedGeneration"] = cur.GetGeneration()
			setCondition(cur, c)
		}
		_, err = e.c.dyn.Resource(gvrGateway).Namespace(cur.GetNamespace()).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// hashedName is Envoy Gateway's name for generated resources: the input
// with "/" made "-", cut to limit characters, and the first 8 hex characters
// of its SHA-256 (envoyproxy/gateway v1.8.1 internal/utils/misc.go,
// GetHashedName). The function pins envoyDeployment.name, so this is only
// the fallback a Gateway without a pinned name would get.
func hashedName(nsName string, limit int) string {
	sum := sha256.Sum256([]byte(nsName))
	h := hex.EncodeToString(sum[:])[:8]
	n := strings.ReplaceAll(nsName, "/", "-")
	if len(n) > limit {
		n = strings.TrimRight(n[:limit], "-")
	}
	return n + "-" + h
}

// markerPatch is one template patch the AI Gateway stand-in made.
type markerPatch struct {
	at         time.Time
	deployment string
	value      string
}

// aiGateway stands in for Envoy AI Gateway v1.1. Its route controller
// generates each AIGatewayRoute's HTTPRoute and accepts the route, or not,
// as v1.0.0 does (routes_test.go, syncRoute). Its gateway controller follows annotateGatewayPods
// (internal/controller/gateway.go): for a Gateway with at least one
// attached AIGatewayRoute, it finds the Deployments labelled with the
// owning gateway in the Gateway's namespace and Envoy Gateway's; if any of
// them is mid-rollout (observedGeneration < generation, or replicas >
// updatedReplicas) it does nothing and looks again later (upstream
// requeues after 5 s); otherwise, when the pod template's
// extproc-config-hash differs from the hash of the ext-proc inputs, it
// merge-patches the template annotation, which makes the Deployment
// controller roll. It leaves out the filter-config Secret, the
// per-pod uuid annotation, the sidecar-injecting webhook and its
// finalizers.
type aiGateway struct {
	c    *cluster
	kick kicker

	mu      sync.Mutex
	config  string // the ext-proc injection inputs; the marker is their hash
	patches []markerPatch
}

// setConfig changes the ext-proc inputs, as an AI Gateway upgrade or a
// GatewayConfig change would, so that the next reconcile writes a new hash.
func (a *aiGateway) setConfig(cfg string) {
	a.mu.Lock()
	a.config = cfg
	a.mu.Unlock()
	a.kick.kick()
}

// hash is the marker value for the current inputs.
func (a *aiGateway) hash() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	sum := sha256.Sum256([]byte(a.config))
	return hex.EncodeToString(sum[:])
}

// patched returns the template patches made so far.
func (a *aiGateway) patched() []markerPatch {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]markerPatch(nil), a.patches...)
}

func (a *aiGateway) reconcile(ctx context.Context) error {
	routes, err := a.c.dyn.Resource(gvrAIRoute).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("cannot list AIGatewayRoutes: %w", err)
	}
	attached := map[types.NamespacedName]bool{}
	for i := range routes.Items {
		r := &routes.Items[i]
		if r.GetDeletionTimestamp() != nil {
			continue
		}
		if err := a.syncRoute(ctx, r); err != nil {
			return err
		}
		refs, _, _ := unstructured.NestedSlice(r.Object, "spec", "parentRefs")
		for _, x := range refs {
			ref, _ := x.(map[string]any)
			if k, ok := ref["kind"].(string); ok && k != "Gateway" {
				continue
			}
			ns, _ := ref["namespace"].(string)
			if ns == "" {
				ns = r.GetNamespace() // a parentRef's namespace defaults to the route's
			}
			name, _ := ref["name"].(string)
			attached[types.NamespacedName{Namespace: ns, Name: name}] = true
		}
	}
	for gw := range attached {
		if err := a.annotate(ctx, gw); err != nil {
			return err
		}
	}
	return nil
}

// annotate rolls the ext-proc marker into the gateway's Deployments.
func (a *aiGateway) annotate(ctx context.Context, gw types.NamespacedName) error {
	sel := fmt.Sprintf("%s=%s,%s=%s", labelOwningGatewayName, gw.Name, labelOwningGatewayNamespace, gw.Namespace)
	var deps []appsv1.Deployment
	for _, ns := range []string{gw.Namespace, envoyGatewayNS} {
		l, err := a.c.dyn.Resource(gvrDeployment).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return fmt.Errorf("cannot list Envoy Deployments in %s: %w", ns, err)
		}
		for i := range l.Items {
			d := appsv1.Deployment{}
			if err := fromUnstructured(&l.Items[i], &d); err != nil {
				return err
			}
			deps = append(deps, d)
		}
	}
	for _, d := range deps {
		if d.Status.ObservedGeneration < d.Generation || d.Status.Replicas > d.Status.UpdatedReplicas {
			return nil // mid-rollout: upstream requeues and touches nothing
		}
	}
	want := a.hash()
	for _, d := range deps {
		if d.Spec.Template.Annotations[markerConfigHash] == want {
			continue
		}
		patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, markerConfigHash, want)
		if _, err := a.c.dyn.Resource(gvrDeployment).Namespace(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, []byte(patch),
			metav1.PatchOptions{FieldManager: "ai-gateway-controller"}); err != nil {
			return fmt.Errorf("cannot patch the ext-proc marker into %s/%s: %w", d.Namespace, d.Name, err)
		}
		a.mu.Lock()
		a.patches = append(a.patches, markerPatch{at: time.Now(), deployment: d.Name, value: want})
		a.mu.Unlock()
	}
	return nil
}

// kubelet stands in for the kubelet of a node that runs every pod. There
// is no node: a pod is never bound (a bound pod would wait for a real
// kubelet to confirm its deletion and hang in Terminating), and the API
// server accepts status from us for an unbound pod. After startup, the
// time an Envoy takes to pass its readiness probe, it sets the pod Running
// with Initialized, ContainersReady and Ready True through the status
// subresource, which is what the ReplicaSet and Deployment controllers
// count as available (minReadySeconds is 0). While held, it starts no new
// pod, like a node that is slow to pull an image; pods already Ready stay
// Ready.
type kubelet struct {
	c       *cluster
	startup time.Duration
	kick    kicker

	mu   sync.Mutex
	hold bool
	seen map[types.UID]time.Time
}

// setHold holds or releases pods that are not Ready yet.
func (k *kubelet) setHold(h bool) {
	k.mu.Lock()
	k.hold = h
	k.mu.Unlock()
	k.kick.kick()
}

func (k *kubelet) reconcile(ctx context.Context) error {
	l, err := k.c.dyn.Resource(gvrPod).Namespace(envoyGatewayNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("cannot list pods: %w", err)
	}
	pods := make([]corev1.Pod, len(l.Items))
	for i := range l.Items {
		if err := fromUnstructured(&l.Items[i], &pods[i]); err != nil {
			return err
		}
	}
	k.mu.Lock()
	hold := k.hold
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
		if !hold && now.Sub(first) >= k.startup {
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

func (k *kubelet) start(ctx context.Context, p *corev1.Pod) error {
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
	_, err = k.c.dyn.Resource(gvrPod).Namespace(p.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{})
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

// standIns are the three stand-ins, running.
type standIns struct {
	eg      *envoyGateway
	aigw    *aiGateway
	kubelet *kubelet
}

// startStandIns creates the GatewayClass that an Envoy Gateway install
// brings (its namespace is created with the control plane), and runs the
// stand-ins until the test ends. Watches on what each upstream controller
// watches wake them; a timer covers upstream's requeues.
func (c *cluster) startStandIns(ctx context.Context, tb testing.TB) *standIns {
	c.create(ctx, gvrGatewayClass, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1",
		"kind":       "GatewayClass",
		"metadata":   map[string]any{"name": gatewayClassName},
		"spec":       map[string]any{"controllerName": egControllerName},
	}})
	s := &standIns{
		// 192.0.2.0/24 is TEST-NET-1: an address nothing will ever answer.
		eg:      &envoyGateway{c: c, address: "192.0.2.10", kick: newKicker()},
		aigw:    &aiGateway{c: c, config: "ext-proc inputs: image v1.1.0", kick: newKicker()},
		kubelet: &kubelet{c: c, startup: time.Second, kick: newKicker(), seen: map[types.UID]time.Time{}},
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	tb.Cleanup(func() { cancel(); wg.Wait() })
	watchers := []struct {
		gvr   schema.GroupVersionResource
		kicks []kicker
	}{
		{gvrGateway, []kicker{s.eg.kick, s.aigw.kick}},
		{gvrEnvoyProxy, []kicker{s.eg.kick}},
		{gvrDeployment, []kicker{s.eg.kick, s.aigw.kick}},
		{gvrHTTPRoute, []kicker{s.eg.kick}},
		{gvrRouteFilter, []kicker{s.eg.kick}},
		{gvrBackend, []kicker{s.eg.kick}},
		{gvrClientPolicy, []kicker{s.eg.kick}},
		{gvrTrafficPolicy, []kicker{s.eg.kick}},
		{gvrNamespace, []kicker{s.eg.kick}},
		{gvrAIRoute, []kicker{s.aigw.kick}},
		{gvrAIBackend, []kicker{s.aigw.kick}},
		{gvrPod, []kicker{s.kubelet.kick}},
	}
	for _, w := range watchers {
		wg.Go(func() { ; c.kickOnChange(ctx, w.gvr, w.kicks...) })
	}
	for _, r := range []struct {
		name     string
		kick     kicker
		interval time.Duration
		fn       func(context.Context) error
	}{
		{"Envoy Gateway", s.eg.kick, 2 * time.Second, s.eg.reconcile},
		{"AI Gateway", s.aigw.kick, 5 * time.Second, s.aigw.reconcile},
		{"kubelet", s.kubelet.kick, 200 * time.Millisecond, s.kubelet.reconcile},
	} {
		wg.Go(func() { ; loop(ctx, tb, r.name, r.kick, r.interval, r.fn) })
	}
	return s
}

// kickOnChange wakes the given loops on every change to a resource, and
// watches again whenever the watch ends.
func (c *cluster) kickOnChange(ctx context.Context, gvr schema.GroupVersionResource, kicks ...kicker) {
	for ctx.Err() == nil {
		w, err := c.dyn.Resource(gvr).Watch(ctx, metav1.ListOptions{})
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
