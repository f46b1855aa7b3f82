package controlplane

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/gatewayready"
	"github.com/modelplaneai/function-inference-gateway/internal/rollout"
)

// Composition resource names and labels Crossplane puts on composed
// resources (crossplane v2.3.0: crossplane-runtime v2.3.0 pkg/xcrd and the
// composite package; v2.2.0: its internal/xcrd and composite packages).
const (
	annotationResourceName = "crossplane.io/composition-resource-name"
	labelComposite         = "crossplane.io/composite"
)

// timeline records when things first happened, relative to t0.
type timeline struct {
	mu    sync.Mutex
	t0    time.Time
	marks []timelineMark
}

type timelineMark struct {
	what string
	at   time.Duration
}

// start sets t0 and forgets earlier marks.
func (tl *timeline) start(t0 time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.t0, tl.marks = t0, nil
}

// mark records what, the first time only, at the given time.
func (tl *timeline) mark(what string, at time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.t0.IsZero() {
		return
	}
	for _, m := range tl.marks {
		if m.what == what {
			return
		}
	}
	tl.marks = append(tl.marks, timelineMark{what: what, at: at.Sub(tl.t0)})
}

// has reports whether what has been marked.
func (tl *timeline) has(what string) (time.Duration, bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, m := range tl.marks {
		if m.what == what {
			return m.at, true
		}
	}
	return 0, false
}

func (tl *timeline) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	ms := slices.Clone(tl.marks)
	slices.SortStableFunc(ms, func(a, b timelineMark) int { return int(a.at - b.at) })
	var sb strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&sb, "  %7.2fs  %s\n", m.at.Seconds(), m.what)
	}
	return sb.String()
}

// Timeline entries.
const (
	tlXRCreated        = "InferenceGateway created"
	tlObjectsCreated   = "all gateway Objects composed"
	tlGatewayAddress   = "Gateway has status.addresses"
	tlAnchorAccepted   = "anchor AIGatewayRoute Accepted"
	tlDeployment       = "Envoy Deployment created"
	tlMarker           = "ext-proc marker in the pod template"
	tlRolloutComplete  = "rollout complete (rule holds on the Deployment)"
	tlAllAvailable     = "all replicas available on the current template"
	tlObjectReady      = "envoy-deployment Object Ready=True"
	tlGatewayReady     = "InferenceGateway GatewayReady=True"
	tlRouteCreated     = "ModelRoute created"
	tlRouteObject      = "model AIGatewayRoute in the API server"
	tlRoutingReady     = "ModelRoute RoutingReady=True"
	tlKubeletReleased  = "kubelet stand-in released (pods may start)"
	tlMarkerPatchFirst = "AI Gateway patched its marker into the template"
)

// transition is one change of a condition seen on an XR.
type transition struct {
	at                      time.Time
	status, reason, message string
	// rv is the object's resourceVersion at that change, 0 if unknown.
	// Written by one etcd, resourceVersions are its revisions, one counter
	// for every object (Kubernetes asks clients not to rely on that; the
	// suite runs its own etcd and reads them only to order writes of two
	// objects, which the watches' arrival times cannot do).
	rv int64
}

// revision is u's resourceVersion as an etcd revision, or 0.
func revision(u *unstructured.Unstructured) int64 {
	n, _ := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
	return n
}

// deletion is one object the API server deleted.
type deletion struct {
	at            time.Time
	resource      string
	namespace     string
	name          string
	allowed       bool
	allowedReason string
}

// allowance permits the deletion of matching objects.
type allowance struct {
	reason    string
	resource  string
	namespace string
	name      string // "" matches any name
	// composite, when set, matches only objects labelled as composed
	// for that composite (labelComposite): an Object a reconcile created
	// just before its composite's deletion has a name nobody knew.
	composite string
	// resourceName, when set, matches only Objects of that composition
	// resource name (annotationResourceName): a backend removed from a
	// route takes its Objects, whose names nobody chose.
	resourceName string
}

// world watches the API server for the whole test: it checks the
// invariants on every event, keeps the timeline, the condition
// transitions of the XRs and every deletion.
type world struct {
	tb     testing.TB
	c      *cluster
	rule   *rollout.Rule
	teamNS string
	tl     *timeline

	watchers map[schema.GroupVersionResource]*watcher

	mu         sync.Mutex
	allowances []allowance
	deletions  []deletion
	violations []string
	reported   int // violations already reported
	checks     int // agreement checks made on Object events
	gwTrans    []transition
	objTrans   []transition              // Ready of the envoy-deployment Object
	byRoute    map[string][]transition   // RoutingReady of every ModelRoute, by namespace/name
	pending    map[string]*pendingReplay // conditions Crossplane replayed, not judged yet (replay_test.go)
	replays    []replay
	suspect    *suspect                // GatewayReady=True beside unfinished rollout counters
	synced     map[string][]transition // Synced of the gateway's Objects, by resource name
	secrets    []secretValue           // values no Object or XR may ever hold
	leaked     map[string]bool         // leaks already reported, by object and value
	scanned    int                     // Object and XR observations checked for secrets
	events     map[string]int          // changes seen, by resource
	sidecar    sidecarState            // the seed's invariant (sidecar_test.go)
	spends     map[string][]spend      // breaker tokens spent, by ModelRoute (breaker_test.go)
	spendSeen  map[types.UID]bool      // objects whose creation was counted
}

// suspect is an InferenceGateway state that breaks the invariant unless
// it is the moment between Crossplane's two status writes.
type suspect struct {
	since    time.Time
	counters map[string]any
	reported bool
}

// suspectGrace is how long GatewayReady=True may be seen beside the
// counters of an unfinished rollout. Crossplane writes an XR's status in
// two requests per reconcile: it server-side applies the function's
// desired status (status.rollout here) while composing, and updates the
// conditions (GatewayReady) at the end (crossplane v2.3.0 and v2.2.0
// composite/composition_functions.go and reconciler.go). A watcher can see
// the new counters with the old condition in between, for milliseconds. A
// function that really said True would leave the pair in place until its
// next reconcile, a TTL (one minute while True) or a watch event later, so a pair
// that outlives this grace is a violation.
const suspectGrace = 15 * time.Second

// watchedForDeletion are the kinds whose deletion the test watches: every
// kind the two XRs compose, remotely and as Objects, and the XRs.
var watchedForDeletion = []schema.GroupVersionResource{
	gvrObject, gvrAIRoute, gvrBackend, gvrAIBackend, gvrSecPolicy, gvrSecret, gvrNamespace,
	gvrGateway, gvrEnvoyProxy, gvrTrafficPolicy, gvrClientPolicy, gvrEGSecurityPolicy, gvrDeployment, gvrHTTPRoute,
	gvrInferenceGW, gvrModelRoute,
}

// watch starts watching and waits until every watcher has listed once.
func (c *cluster) watch(ctx context.Context, tb testing.TB, rule *rollout.Rule, teamNS string) *world {
	w := &world{tb: tb, c: c, rule: rule, teamNS: teamNS, tl: &timeline{},
		watchers: map[schema.GroupVersionResource]*watcher{}, synced: map[string][]transition{}, leaked: map[string]bool{},
		events: map[string]int{}, byRoute: map[string][]transition{}, pending: map[string]*pendingReplay{}, sidecar: sidecarState{
			pods: map[string]*corev1.Pod{}, routingReady: map[string]bool{}, replayedTrue: map[string]bool{}, reported: map[string]bool{},
		}}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	tb.Cleanup(func() { cancel(); wg.Wait() })
	for _, gvr := range watchedForDeletion {
		wt := newWatcher(c, gvr,
			func(u *unstructured.Unstructured) { w.onChange(gvr, u) },
			func(u *unstructured.Unstructured) { w.onDelete(gvr, u) })
		w.watchers[gvr] = wt
	}
	// Pods come and go by design; they are watched for the sidecar
	// invariant only.
	w.watchers[gvrPod] = newWatcher(c, gvrPod,
		func(u *unstructured.Unstructured) { w.onPod(u, false) },
		func(u *unstructured.Unstructured) { w.onPod(u, true) })
	for _, wt := range w.watchers {
		wg.Go(func() { wt.run(ctx) })
	}
	for gvr, wt := range w.watchers {
		select {
		case <-wt.synced:
		case <-ctx.Done():
			tb.Fatalf("cannot list %s: %v", gvr, ctx.Err())
		}
	}
	return w
}

// allow permits deletions from now on.
func (w *world) allow(a allowance) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.allowances = append(w.allowances, a)
}

func (w *world) violate(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}

// check fails the test for every invariant violation seen since the last
// check. Watch handlers never call t.Errorf themselves: they run on
// their own goroutines and may outlive a subtest.
func (w *world) check(tb testing.TB) {
	tb.Helper()
	w.mu.Lock()
	if sp := w.suspect; sp != nil && !sp.reported && time.Since(sp.since) > suspectGrace {
		sp.reported = true
		w.violations = append(w.violations, fmt.Sprintf("%s GatewayReady=True for %s with rollout counters of an unfinished rollout: %v",
			sp.since.Format("15:04:05.000"), time.Since(sp.since).Round(time.Second), sp.counters))
	}
	vs := w.violations[w.reported:]
	w.reported = len(w.violations)
	w.mu.Unlock()
	for _, v := range vs {
		tb.Errorf("invariant violated: %s", v)
	}
}

// deleted returns the deletions seen so far.
func (w *world) deleted() []deletion {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.deletions)
}

func (w *world) onDelete(gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	d := deletion{at: time.Now(), resource: gvr.Resource, namespace: u.GetNamespace(), name: u.GetName()}
	if gvr == gvrModelRoute {
		w.mu.Lock()
		w.routeDeletedLocked(u.GetNamespace()+"/"+u.GetName(), d.at)
		w.mu.Unlock()
	}
	if !w.relevant(gvr, u) {
		return
	}
	w.mu.Lock()
	for _, a := range w.allowances {
		if a.resource == gvr.Resource && a.namespace == u.GetNamespace() && (a.name == "" || a.name == u.GetName()) &&
			(a.composite == "" || a.composite == u.GetLabels()[labelComposite]) &&
			(a.resourceName == "" || a.resourceName == u.GetAnnotations()[annotationResourceName]) {
			d.allowed, d.allowedReason = true, a.reason
			break
		}
	}
	w.deletions = append(w.deletions, d)
	w.mu.Unlock()
	if !d.allowed {
		what := ""
		if n := u.GetAnnotations()[annotationResourceName]; n != "" {
			what = fmt.Sprintf(" (%s of %s)", n, u.GetLabels()[labelComposite])
		}
		w.violate("unexpected deletion of %s %s/%s%s", gvr.Resource, u.GetNamespace(), u.GetName(), what)
	}
}

// relevant reports whether an object belongs to the gateway or the model
// route: Secrets and Deployments of other namespaces, and namespaces other
// than the team's, are Crossplane's and the cluster's own business.
func (w *world) relevant(gvr schema.GroupVersionResource, u *unstructured.Unstructured) bool {
	switch gvr {
	case gvrNamespace:
		return u.GetName() == w.teamNS || u.GetName() == teamControlNS || u.GetName() == objectNS || u.GetName() == gatewayNS || u.GetName() == envoyGatewayNS
	case gvrSecret:
		return u.GetNamespace() == w.teamNS || u.GetNamespace() == teamControlNS
	case gvrDeployment:
		return u.GetNamespace() == envoyGatewayNS
	}
	return true
}

func (w *world) onChange(gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	now := time.Now()
	w.mu.Lock()
	w.events[gvr.Resource]++
	w.mu.Unlock()
	// Every event is an observation of the sidecar invariant, checked once
	// the event's own state (a ModelRoute's RoutingReady) is recorded.
	defer func() {
		w.mu.Lock()
		w.checkSidecarLocked()
		w.mu.Unlock()
	}()
	switch gvr {
	case gvrObject, gvrInferenceGW, gvrModelRoute:
		w.checkSecrets(gvr, u)
		w.recordSpend(u.GetKind(), u, now)
	}
	switch gvr {
	case gvrObject:
		w.onObject(u, now)
	case gvrGateway:
		if addrs, _, _ := unstructured.NestedSlice(u.Object, "status", "addresses"); len(addrs) > 0 && u.GetNamespace() == gatewayNS {
			w.tl.mark(tlGatewayAddress, now)
		}
	case gvrAIRoute:
		if conditionStatus(u, "Accepted") == "True" && u.GetNamespace() == gatewayNS {
			w.tl.mark(tlAnchorAccepted, now)
		}
		if u.GetNamespace() == w.teamNS && u.GetName() == routeName {
			w.tl.mark(tlRouteObject, now)
		}
	case gvrDeployment:
		if u.GetNamespace() != envoyGatewayNS {
			return
		}
		w.tl.mark(tlDeployment, now)
		if u.GetLabels()[labelOwningGatewayName] == gatewayXRName {
			w.onDeploymentMarkers(u, now)
		}
		for _, k := range templateMarkers {
			if v, _, _ := unstructured.NestedString(u.Object, "spec", "template", "metadata", "annotations", k); v != "" {
				w.tl.mark(tlMarker, now)
			}
		}
		if v, err := w.rule.Evaluate(u.Object); err == nil && v.Ready {
			w.tl.mark(tlRolloutComplete, now)
			want := int64At(u.Object, "spec", "replicas")
			if int64At(u.Object, "status", "availableReplicas") == want && int64At(u.Object, "status", "updatedReplicas") == want && int64At(u.Object, "status", "replicas") == want {
				w.tl.mark(tlAllAvailable, now)
			}
		}
	case gvrInferenceGW:
		// A second InferenceGateway (scenario 5d) has its own conditions.
		if u.GetName() == gatewayXRName {
			w.onGateway(u, now)
		}
	case gvrModelRoute:
		w.onRoute(u, now)
	}
}

// onObject checks, on every event of the gateway's envoy-deployment
// Object, that the Ready condition provider-kubernetes computed from our
// celQuery agrees with the function's own rule evaluated on the same
// manifest the provider wrote beside it. The provider sets both from one
// read of the Deployment in one status update (provider-kubernetes
// internal/controller/namespaced/object/object.go: Observe stores the
// live object in status.atProvider.manifest and derives Ready from it), so
// the two must agree at every observation, not just eventually.
func (w *world) onObject(u *unstructured.Unstructured, now time.Time) {
	if u.GetNamespace() == objectNS && u.GetLabels()[labelComposite] == gatewayXRName {
		n := 0
		for _, ou := range w.watchers[gvrObject].list() {
			if ou.GetNamespace() == objectNS && ou.GetLabels()[labelComposite] == gatewayXRName {
				n++
			}
		}
		if n == len(gateway.Resources) {
			w.tl.mark(tlObjectsCreated, now)
		}
	}
	if res := u.GetAnnotations()[annotationResourceName]; u.GetNamespace() == objectNS && res != "" {
		st, reason := conditionStatus(u, "Synced"), conditionReason(u, "Synced")
		msg, _ := condition(u, "Synced")["message"].(string)
		w.mu.Lock()
		ts := w.synced[res]
		if n := len(ts); st != "" && (n == 0 || ts[n-1].status != st || ts[n-1].reason != reason) {
			w.synced[res] = append(ts, transition{at: now, status: st, reason: reason, message: msg})
		}
		w.mu.Unlock()
	}
	if u.GetAnnotations()[annotationResourceName] != gateway.ResourceEnvoyDeployment {
		return
	}
	manifest, ok, _ := unstructured.NestedMap(u.Object, "status", "atProvider", "manifest")
	ready := condition(u, "Ready")
	if !ok || ready == nil {
		return
	}
	if q, _, _ := unstructured.NestedString(u.Object, "spec", "readiness", "celQuery"); q != w.rule.Expression {
		w.violate("the envoy-deployment Object's celQuery is not the function's rollout rule:\n got %s\nwant %s", q, w.rule.Expression)
	}
	v, err := w.rule.Evaluate(manifest)
	if err != nil {
		w.violate("cannot evaluate the rollout rule on the Object's manifest: %v", err)
		return
	}
	w.mu.Lock()
	w.checks++
	w.mu.Unlock()
	if (ready["status"] == "True") != v.Ready {
		w.violate("envoy-deployment Object Ready=%v (%v) but the function's rule says %v %v on the same manifest (generation %d, status %v)",
			ready["status"], ready["reason"], v.Ready, v.Failed, int64At(manifest, "metadata", "generation"), manifest["status"])
	}
	if v.Ready {
		w.tl.mark(tlObjectReady, now)
	}
	st, _ := ready["status"].(string)
	w.mu.Lock()
	if n := len(w.objTrans); n == 0 || w.objTrans[n-1].status != st {
		w.objTrans = append(w.objTrans, transition{at: now, status: st})
	}
	w.mu.Unlock()
}

// routeTransitions returns the recorded RoutingReady changes of the
// ModelRoute ns/name.
func (w *world) routeTransitions(ns, name string) []transition {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.promoteLocked(time.Now())
	return slices.Clone(w.byRoute[ns+"/"+name])
}

// objectTransitions returns the recorded Ready changes of the
// envoy-deployment Object.
func (w *world) objectTransitions() []transition {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.objTrans)
}

// onGateway records GatewayReady transitions and checks that GatewayReady
// is True only with rollout counters that describe a finished rollout.
//
// Every change is recorded, a replay of Crossplane's included
// (replay_test.go): the judge's grace would hold a gateway verdict back
// from the checks that read the transitions right after the API server
// showed it (followRollout).
func (w *world) onGateway(u *unstructured.Unstructured, now time.Time) {
	st, reason := conditionStatus(u, gateway.ConditionType), conditionReason(u, gateway.ConditionType)
	msg, _ := condition(u, gateway.ConditionType)["message"].(string)
	w.mu.Lock()
	if last := lastOf(w.gwTrans); st != "" && (last == nil || last.status != st || last.reason != reason) {
		w.gwTrans = append(w.gwTrans, transition{at: now, status: st, reason: reason, message: msg, rv: revision(u)})
	}
	w.mu.Unlock()
	if st != "True" {
		w.clearSuspect()
		return
	}
	w.tl.mark(tlGatewayReady, now)
	if reason != gatewayready.ReasonReady {
		w.violate("GatewayReady=True with reason %q, want %q", reason, gatewayready.ReasonReady)
	}
	r, ok, _ := unstructured.NestedMap(u.Object, "status", "rollout")
	if ok && int64At(r, "observedGeneration") >= int64At(r, "generation") &&
		int64At(r, "updatedReplicas") == int64At(r, "replicas") && int64At(r, "availableReplicas") >= 1 {
		w.clearSuspect()
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch sp := w.suspect; {
	case sp == nil:
		w.suspect = &suspect{since: now, counters: r}
	case !sp.reported && now.Sub(sp.since) > suspectGrace:
		sp.reported = true
		w.violations = append(w.violations, fmt.Sprintf("%s GatewayReady=True for %s with rollout counters of an unfinished rollout: %v",
			sp.since.Format("15:04:05.000"), now.Sub(sp.since).Round(time.Second), r))
	}
}

func (w *world) clearSuspect() {
	w.mu.Lock()
	w.suspect = nil
	w.mu.Unlock()
}

// onRoute records RoutingReady transitions; not one Crossplane replayed
// from its cache, unless it stands (replay_test.go). The sidecar invariant
// takes the condition as the watch shows it, replays included.
func (w *world) onRoute(u *unstructured.Unstructured, now time.Time) {
	st, reason := conditionStatus(u, "RoutingReady"), conditionReason(u, "RoutingReady")
	msg, _ := condition(u, "RoutingReady")["message"].(string)
	cur := transition{at: now, status: st, reason: reason, message: msg, rv: revision(u)}
	k := u.GetNamespace() + "/" + u.GetName()
	w.mu.Lock()
	defer w.mu.Unlock()
	pending := w.judgeLocked(k, "RoutingReady", cur, u, now)
	w.sidecar.routingReady[k] = st == "True"
	w.sidecar.replayedTrue[k] = pending && st == "True"
	w.sidecar.everTrue = w.sidecar.everTrue || st == "True"
	if last := lastOf(w.byRoute[k]); last != nil && last.status == "True" && k == teamControlNS+"/"+routeName {
		w.tl.mark(tlRoutingReady, last.at)
	}
}

// lastOf returns the last of ts, or nil.
func lastOf(ts []transition) *transition {
	if len(ts) == 0 {
		return nil
	}
	return &ts[len(ts)-1]
}

// syncedTransitions renders the Synced changes of the gateway's Objects.
func (w *world) syncedTransitions(t0 time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var sb strings.Builder
	for _, res := range gateway.Resources {
		fmt.Fprintf(&sb, " %s:\n%s", res, formatTransitions(t0, w.synced[res]))
	}
	return sb.String()
}

// lastTransition returns when GatewayReady or RoutingReady last changed.
func (w *world) lastTransition() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.promoteLocked(time.Now())
	var last time.Time
	for _, ts := range [][]transition{w.gwTrans, w.byRoute[teamControlNS+"/"+routeName]} {
		if n := len(ts); n > 0 && ts[n-1].at.After(last) {
			last = ts[n-1].at
		}
	}
	return last
}

// transitions returns the recorded GatewayReady and RoutingReady changes.
func (w *world) transitions() (gw, rt []transition) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.promoteLocked(time.Now())
	return slices.Clone(w.gwTrans), slices.Clone(w.byRoute[teamControlNS+"/"+routeName])
}

func formatTransitions(t0 time.Time, ts []transition) string {
	var sb strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&sb, "  %7.2fs  %s (%s): %s\n", t.at.Sub(t0).Seconds(), t.status, t.reason, t.message)
	}
	return sb.String()
}

// eventCounts renders how many changes the watch saw of each resource.
func (w *world) eventCounts() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ks := make([]string, 0, len(w.events))
	for k := range w.events {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%s %d", k, w.events[k])
	}
	return strings.Join(parts, ", ")
}
