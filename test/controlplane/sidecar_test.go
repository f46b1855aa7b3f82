package controlplane

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
)

// The seed's invariant, the property the whole product exists for: at
// every observation, whenever any ModelRoute says RoutingReady=True, every
// Ready Envoy pod of the gateway has AI Gateway's ext-proc sidecar in its
// spec. A pod without it answers every model request with a 500. The pods
// are the real API server's, their sidecars put there by AI Gateway's real
// webhook; only their readiness comes from the kubelet stand-in.
//
// An observation is any event of a watched resource: the invariant is
// checked on the latest state the watch showed of every ModelRoute and
// every Envoy pod. A RoutingReady=True counts as soon as the watch shows
// it, even one the judge holds back as a replay of Crossplane's
// (replay_test.go): a condition users can see is one users act on, and so
// a replay that later stands as the verdict was checked against every pod
// state of its whole window as it came. Only observations that could
// fail count (some ModelRoute True beside some Ready Envoy pod), and a run
// in which ModelRoutes were True but the count stayed zero did not check
// the invariant at all (sidecarUnexercised).
//
// A terminating pod does not count: the endpoints controllers take a pod
// out of service once it is terminating (and here, with no kubelet, the
// API server removes a deleted pod at once).

// Template annotations that mark an ext-proc rollout, written out here, not
// taken from the function, so that a wrong key there fails the suite:
// AI Gateway v1.0.0's uuid (ai-gateway v1.0.0
// internal/controller/ai_gateway_route.go, aigatewayUUIDAnnotationKey),
// v1.1.0's config hash, and the function's own marker for the case v1.0.0
// writes none.
const (
	aigwUUID  = "aigateway.envoyproxy.io/uuid"
	aigwHash  = "aigateway.envoyproxy.io/extproc-config-hash"
	ownMarker = "modelplane.ai/ext-proc-verified"
)

var templateMarkers = []string{aigwUUID, aigwHash, ownMarker}

// sidecarState is what the world keeps for the invariant.
type sidecarState struct {
	pods         map[string]*corev1.Pod // the gateway's live Envoy pods, by name
	routingReady map[string]bool        // RoutingReady=True as last seen, by ModelRoute
	replayedTrue map[string]bool        // of those, the ones the judge holds back as replays
	everTrue     bool                   // some ModelRoute was seen RoutingReady=True
	observations int                    // observations that could have failed
	violations   int
	reported     map[string]bool // pod and route pairs already reported

	created []podCreated // every Envoy pod of the gateway, as created
	markers []markerChange
}

// podCreated is one Envoy pod as the API server admitted it, after AI
// Gateway's webhook.
type podCreated struct {
	at         time.Time
	replicaSet string
	sidecar    bool
}

// markerChange is one change of the Envoy Deployment's template: its
// markers, or its generation.
type markerChange struct {
	at         time.Time
	uid        string // the Deployment's uid: a re-created Deployment starts over
	generation int64
	values     map[string]string
}

func (m markerChange) String() string {
	return fmt.Sprintf("%s Deployment %s generation %d markers %v", m.at.Format("15:04:05.000"), m.uid[:8], m.generation, m.values)
}

// envoyPodOfGateway reports whether u is an Envoy pod of the suite's
// gateway.
func envoyPodOfGateway(u *unstructured.Unstructured) bool {
	l := u.GetLabels()
	return u.GetNamespace() == envoyGatewayNS && l[labelOwningGatewayName] == gatewayXRName && l[labelOwningGatewayNamespace] == gatewayNS
}

// onPod records a pod's latest state and checks the invariant.
func (w *world) onPod(u *unstructured.Unstructured, deleted bool) {
	if !envoyPodOfGateway(u) {
		return
	}
	p := &corev1.Pod{}
	if err := fromUnstructured(u, p); err != nil {
		w.violate("cannot read Envoy pod %s: %v", u.GetName(), err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s := &w.sidecar
	if _, seen := s.pods[p.Name]; !seen && !deleted && p.DeletionTimestamp == nil {
		s.created = append(s.created, podCreated{at: time.Now(), replicaSet: ownerReplicaSet(p), sidecar: sidecar(p) != nil})
	}
	if deleted || p.DeletionTimestamp != nil {
		delete(s.pods, p.Name)
	} else {
		s.pods[p.Name] = p
	}
	w.checkSidecarLocked()
}

// ownerReplicaSet is the uid of the pod's ReplicaSet: a re-created
// Deployment's ReplicaSet may have the old one's name, never its uid.
func ownerReplicaSet(p *corev1.Pod) string {
	for _, o := range p.OwnerReferences {
		if o.Kind == "ReplicaSet" {
			return string(o.UID)
		}
	}
	return ""
}

// checkSidecarLocked checks the invariant on the state as it is now, and
// counts the observation if it could have failed: some ModelRoute
// RoutingReady=True beside some Ready Envoy pod.
func (w *world) checkSidecarLocked() {
	s := &w.sidecar
	var ready []string
	for r, ok := range s.routingReady {
		if ok {
			ready = append(ready, r)
		}
	}
	if len(ready) == 0 {
		return
	}
	sort.Strings(ready)
	names := make([]string, 0, len(s.pods))
	for name, p := range s.pods {
		if podReady(p) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return
	}
	sort.Strings(names)
	s.observations++
	for _, name := range names {
		if sidecar(s.pods[name]) != nil {
			continue
		}
		key := name + " " + strings.Join(ready, ",")
		s.violations++
		if s.reported[key] {
			continue
		}
		s.reported[key] = true
		routes := make([]string, len(ready))
		for i, r := range ready {
			routes[i] = r
			if s.replayedTrue[r] {
				routes[i] += " (as Crossplane replayed it from its cache)"
			}
		}
		w.violations = append(w.violations, time.Now().Format("15:04:05.000")+" "+
			fmt.Sprintf("sidecar invariant: RoutingReady=True on %s while Envoy pod %s is Ready without the %s sidecar", strings.Join(routes, ", "), name, sidecarName))
	}
}

// onDeploymentMarkers records a change of the Envoy Deployment's template
// markers.
func (w *world) onDeploymentMarkers(u *unstructured.Unstructured, now time.Time) {
	vals := map[string]string{}
	for _, k := range templateMarkers {
		if v, _, _ := unstructured.NestedString(u.Object, "spec", "template", "metadata", "annotations", k); v != "" {
			vals[k] = v
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if ms := w.sidecar.markers; len(ms) > 0 && ms[len(ms)-1].uid == string(u.GetUID()) &&
		ms[len(ms)-1].generation == u.GetGeneration() && fmt.Sprint(ms[len(ms)-1].values) == fmt.Sprint(vals) {
		return
	}
	w.sidecar.markers = append(w.sidecar.markers, markerChange{at: now, uid: string(u.GetUID()), generation: u.GetGeneration(), values: vals})
}

// markerChanges returns the template marker changes seen so far.
func (w *world) markerChanges() []markerChange {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]markerChange(nil), w.sidecar.markers...)
}

// markerWrites counts the changes that wrote key on the Envoy Deployment
// after the n-th change.
func markerWrites(ms []markerChange, key string) int {
	n := 0
	for i := 1; i < len(ms); i++ {
		if ms[i].values[key] != "" && ms[i].values[key] != ms[i-1].values[key] {
			n++
		}
	}
	if len(ms) > 0 && ms[0].values[key] != "" {
		n++
	}
	return n
}

// sidecarSummary is the line the suite prints at its end: the
// observations that could have failed, and the violations.
func (w *world) sidecarSummary() (observations, violations int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sidecar.observations, w.sidecar.violations
}

// sidecarUnexercised returns why the invariant checked nothing, or "": a
// ModelRoute was RoutingReady=True, but never beside a Ready Envoy pod.
func (w *world) sidecarUnexercised() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sidecar.everTrue && w.sidecar.observations == 0 {
		return "a ModelRoute said RoutingReady=True, but never while an Envoy pod of the gateway was Ready: the sidecar invariant was never exercised"
	}
	return ""
}

// podsCreated returns the Envoy pods created since from, grouped by
// ReplicaSet in the order each first appeared: how many of each had the
// sidecar at creation.
func (w *world) podsCreated(from time.Time) []replicaSetPods {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []replicaSetPods
	idx := map[string]int{}
	for _, p := range w.sidecar.created {
		if p.at.Before(from) {
			continue
		}
		i, ok := idx[p.replicaSet]
		if !ok {
			i = len(out)
			idx[p.replicaSet] = i
			out = append(out, replicaSetPods{uid: p.replicaSet, first: p.at})
		}
		out[i].pods++
		if p.sidecar {
			out[i].withSidecar++
		}
	}
	return out
}

// replicaSetPods counts one ReplicaSet's pods.
type replicaSetPods struct {
	uid               string
	first             time.Time
	pods, withSidecar int
}

func (r replicaSetPods) String() string {
	return fmt.Sprintf("ReplicaSet %s: %d of %d pods had the sidecar at creation", r.uid[:8], r.withSidecar, r.pods)
}

// podsHaveSidecar checks that every live Envoy pod of the gateway has the
// ext-proc sidecar with the given image.
func (sc *scenarios) podsHaveSidecar(t *testing.T, image string) {
	t.Helper()
	pods, err := sc.c.dyn.Resource(gvrPod).Namespace(envoyGatewayNS).List(sc.ctx, metav1.ListOptions{LabelSelector: labelOwningGatewayName + "=" + gatewayXRName})
	must(t, err)
	if len(pods.Items) == 0 {
		t.Errorf("no Envoy pod of the gateway")
	}
	for i := range pods.Items {
		p := &corev1.Pod{}
		must(t, fromUnstructured(&pods.Items[i], p))
		if p.DeletionTimestamp != nil {
			continue
		}
		got := ""
		if c := sidecar(p); c != nil {
			got = c.Image
		}
		if got != image {
			t.Errorf("Envoy pod %s has sidecar image %q, want %q", p.Name, got, image)
		}
	}
}

// envoyDeploymentRecreated is scenario 4b, the other order of the race
// between the first Envoy pods and AI Gateway's filter-config Secret. The
// Envoy Deployment is deleted, and Envoy Gateway restarted: v1.8.1 did not
// create a deleted Deployment again by itself within 3 minutes here, nor
// does v1.8.3, whose infrastructure runner is the same (it
// applies its infrastructure when it gets an update of the infrastructure
// IR: internal/infrastructure/runner/runner.go,
// updateProxyInfraFromSubscription), but does at start. The
// Secret and the routes are still there, so AI Gateway's webhook gives the
// new Deployment's very first pods the sidecar, and AI Gateway v1.0.0,
// which writes its uuid marker only when pods and routes disagree
// (internal/controller/gateway.go, annotateGatewayPods), writes none.
// GatewayReady must still reach True, from the function's own marker, and
// the sidecar invariant must hold throughout.
func (sc *scenarios) envoyDeploymentRecreated(t *testing.T) {
	d := sc.envoyDeployment(sc.ctx)
	if d == nil {
		t.Fatal("no Envoy Deployment")
	}
	name, uid := d.GetName(), d.GetUID()
	sc.w.allow(allowance{reason: "scenario 4b deletes the Envoy Deployment", resource: "deployments", namespace: envoyGatewayNS, name: name})
	from := time.Now()
	bg := metav1.DeletePropagationBackground
	must(t, sc.c.dyn.Resource(gvrDeployment).Namespace(envoyGatewayNS).Delete(sc.ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg}))
	sc.eventually(t, waitSettle, "the Envoy Deployment gone", func(ctx context.Context) string {
		if d := sc.envoyDeployment(ctx); d != nil && d.GetUID() == uid {
			return "still there"
		}
		return ""
	})
	sc.c.restartEnvoyGateway(sc.s.up)
	// How the InferenceGateway looks while its verdict is stale: whether
	// Crossplane's circuit breaker holds its watch events back.
	stale := make(chan string, 1)
	go func() {
		select {
		case <-sc.ctx.Done():
			stale <- "(ended)"
		case <-time.After(10 * time.Second):
			if xr := sc.gatewayXR(sc.ctx); xr != nil {
				stale <- conditionsSummary(xr)
			} else {
				stale <- "(no InferenceGateway)"
			}
		}
	}()
	defer func() { t.Logf("scenario 4b: 10 s after the deletion the InferenceGateway said %s", <-stale) }()
	sc.eventually(t, waitSettle, "Envoy Gateway to create the Envoy Deployment again", func(ctx context.Context) string {
		d := sc.envoyDeployment(ctx)
		if d == nil {
			return "no Envoy Deployment"
		}
		if d.GetUID() == uid {
			return "still the old Deployment"
		}
		return ""
	})
	newUID := sc.envoyDeployment(sc.ctx).GetUID()
	// GatewayReady goes False on the new Deployment (no marker), and only
	// then True again. Until the function runs it still says the old
	// Deployment's True: a stale verdict, measured below.
	var down time.Time
	sc.eventually(t, waitSettle, "GatewayReady=False on the new Deployment", func(ctx context.Context) string {
		gw, _ := sc.w.transitions()
		at, ok := firstAfter(gw, from, "False")
		if !ok {
			return "GatewayReady has not left True since the deletion"
		}
		down = at
		return ""
	})
	// True again only for the new Deployment rolled out with the
	// function's marker, as the function saw it (its status.rollout
	// names that generation).
	sc.eventually(t, waitSettle, "GatewayReady=True on the new Deployment with the function's marker", func(ctx context.Context) string {
		d := sc.envoyDeployment(ctx)
		if d == nil || d.GetUID() != newUID {
			return "the Deployment changed again"
		}
		if v, _, _ := unstructured.NestedString(d.Object, "spec", "template", "metadata", "annotations", ownMarker); v == "" {
			return "no " + ownMarker + " on the template yet"
		}
		if v, err := sc.w.rule.Evaluate(d.Object); err != nil || !v.Ready {
			return fmt.Sprintf("the rule does not hold on the Deployment yet: %v %v", v.Failed, err)
		}
		xr := sc.gatewayXR(ctx)
		if g := int64At(xr.Object, "status", "rollout", "generation"); g != d.GetGeneration() {
			return fmt.Sprintf("the InferenceGateway reports generation %d, the Deployment is at %d", g, d.GetGeneration())
		}
		return wantCondition(xr, "GatewayReady", "True")
	})
	t.Logf("scenario 4b: GatewayReady left True %.2fs after the deletion (the function's first reconcile that saw the new Deployment)", seconds(down.Sub(from)))
	st := sc.agree(t)
	gw, _ := sc.w.transitions()
	t.Logf("scenario 4b: GatewayReady transitions (seconds since the deletion):\n%s", formatTransitions(from, gw))
	for _, m := range sc.w.markerChanges() {
		if m.uid == string(newUID) {
			t.Logf("scenario 4b: %s", m)
		}
	}
	if st != "True" {
		t.Errorf("settled GatewayReady=%s, want True", st)
	}
	created := sc.w.podsCreated(from)
	for _, rs := range created {
		t.Logf("scenario 4b: %s", rs)
	}
	// The first ReplicaSet after the deletion is the new Deployment's
	// first; its pods must have had the sidecar at creation, or this run
	// did not show the order it is here for.
	var first *replicaSetPods
	for i := range created {
		if created[i].first.After(from) {
			first = &created[i]
			break
		}
	}
	switch {
	case first == nil:
		t.Errorf("no Envoy pod was created after the Deployment was deleted")
	case first.withSidecar != first.pods:
		t.Errorf("the new Deployment's first pods lacked the sidecar (%s): the race went the usual way, not the one this scenario shows", first)
	}
	var ai, own int
	for _, m := range sc.w.markerChanges() {
		if m.uid == string(newUID) && m.values[aigwUUID] != "" {
			ai++
		}
		if m.uid == string(newUID) && m.values[ownMarker] != "" {
			own++
		}
	}
	if own == 0 {
		t.Errorf("GatewayReady=True on the new Deployment, whose template never had the function's %s", ownMarker)
	}
	t.Logf("scenario 4b: on the new Deployment, %d template states with AI Gateway's uuid, %d with the function's own marker", ai, own)
	sc.eventually(t, waitRoute, "RoutingReady=True again", func(ctx context.Context) string {
		return wantCondition(sc.routeXR(ctx), "RoutingReady", "True")
	})
	sc.podsHaveSidecar(t, sc.s.up.aigwImage)
	sc.noDeletions(t)
	sc.w.check(t)
}

var (
	gvrVAP        = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	gvrVAPBinding = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}
)

// filterConfigSecret is AI Gateway's filter-config Secret for the suite's
// gateway, in Envoy Gateway's namespace (ai-gateway v1.0.0
// internal/controller/ai_gateway_route.go, FilterConfigSecretPerGatewayName:
// "<gateway>-<gateway namespace>").
var filterConfigSecret = gatewayXRName + "-" + gatewayNS

// holdFilterConfigSecret makes the API server refuse to create AI
// Gateway's filter-config Secret, with a ValidatingAdmissionPolicy, until
// the returned release is called. Scenario 1 uses it to force the usual
// order of the race (the first Envoy pods before the Secret, so without
// the sidecar): with the real controllers either order happens, and a run
// must show the one it is about. AI Gateway retries the refused create
// (its reconcile returns the error).
func (sc *scenarios) holdFilterConfigSecret(t *testing.T) (release func()) {
	t.Helper()
	const name = "controlplane-suite-hold-filter-config-secret"
	sc.c.create(sc.ctx, gvrVAP, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"failurePolicy": "Fail",
			"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
				"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"secrets"},
			}}},
			"validations": []any{map[string]any{
				"expression": fmt.Sprintf("object.metadata.name != %q", filterConfigSecret),
				"message":    "held by the control-plane suite",
			}},
		},
	}})
	sc.c.create(sc.ctx, gvrVAPBinding, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"policyName":        name,
			"validationActions": []any{"Deny"},
			"matchResources": map[string]any{"namespaceSelector": map[string]any{
				"matchLabels": map[string]any{"kubernetes.io/metadata.name": envoyGatewayNS},
			}},
		},
	}})
	// The API server applies a new policy within a moment; a dry-run
	// create says when.
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": filterConfigSecret, "namespace": envoyGatewayNS},
	}}
	sc.eventually(t, waitSettle, "the API server to refuse the filter-config Secret", func(ctx context.Context) string {
		_, err := sc.c.dyn.Resource(gvrSecret).Namespace(envoyGatewayNS).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || !strings.Contains(err.Error(), "held by the control-plane suite") {
			return fmt.Sprintf("a dry-run create gave %v", err)
		}
		return ""
	})
	return func() {
		for _, r := range []struct {
			gvr  schema.GroupVersionResource
			name string
		}{{gvrVAPBinding, name}, {gvrVAP, name}} {
			if err := sc.c.dyn.Resource(r.gvr).Delete(sc.ctx, r.name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("cannot delete %s %s: %v", r.gvr.Resource, r.name, err)
			}
		}
	}
}

// heldPastSettle is how long scenario 1 keeps the filter-config Secret
// held after the first Envoy pods' rollout completed: past the function's
// 15 s marker settle time (internal/gatewayready marker.go), with a margin for
// the reconciles that would have written it.
const heldPastSettle = 30 * time.Second

// secretHeldPastSettle waits, with AI Gateway's filter-config Secret held,
// for the first Envoy pods' rollout to complete (Progressing
// NewReplicaSetAvailable: the pods have no sidecar, and the kubelet
// stand-in starts them), then watches for heldPastSettle: the anchor is
// accepted and the rollout is done, which is all the function's own
// ext-proc marker once needed, but the Secret is missing, so new pods
// would get no sidecar either. The function must not write its marker,
// and GatewayReady must stay False all that time.
func (sc *scenarios) secretHeldPastSettle(t *testing.T) {
	t.Helper()
	sc.eventually(t, waitSettle, "the first Envoy pods' rollout to complete", func(ctx context.Context) string {
		d := sc.envoyDeployment(ctx)
		if d == nil {
			return "no Envoy Deployment yet"
		}
		conds, _, _ := unstructured.NestedSlice(d.Object, "status", "conditions")
		for _, c := range conds {
			cm, _ := c.(map[string]any)
			if cm["type"] == "Progressing" && cm["reason"] == "NewReplicaSetAvailable" {
				return ""
			}
		}
		return "the Deployment's Progressing condition does not say NewReplicaSetAvailable yet"
	})
	completed := time.Now()
	checks := 0
	for time.Since(completed) < heldPastSettle {
		if n := markerWrites(sc.w.markerChanges(), ownMarker); n > 0 {
			t.Fatalf("the function wrote its own ext-proc marker while AI Gateway's filter-config Secret was missing: the new pods would have no sidecar either")
		}
		if st := conditionStatus(sc.gatewayXR(sc.ctx), gateway.ConditionType); st == "True" {
			t.Fatalf("GatewayReady=True while AI Gateway's filter-config Secret was missing and no Envoy pod had the sidecar")
		}
		checks++
		select {
		case <-sc.ctx.Done():
			t.Fatalf("cannot hold the filter-config Secret: %v", sc.ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	xr := sc.gatewayXR(sc.ctx)
	msg, _ := condition(xr, gateway.ConditionType)["message"].(string)
	t.Logf("filter-config Secret held %s past the rollout's completion (%d checks): GatewayReady=%s (%s): %s", heldPastSettle, checks,
		conditionStatus(xr, gateway.ConditionType), conditionReason(xr, gateway.ConditionType), msg)
	if !strings.Contains(msg, filterConfigSecret) {
		t.Errorf("GatewayReady's message does not name the missing filter-config Secret %q: %s", filterConfigSecret, msg)
	}
}
