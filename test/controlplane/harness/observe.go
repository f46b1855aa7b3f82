package harness

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
	AnnotationResourceName = "crossplane.io/composition-resource-name"
	LabelComposite         = "crossplane.io/composite"
)

// Timeline records when things first happened, relative to t0.
type Timeline struct {
	mu    sync.Mutex
	t0    time.Time
	marks []timelineMark
}

type timelineMark struct {
	what string
	at   time.Duration
}

// Start sets t0 and forgets earlier marks.
func (tl *Timeline) Start(t0 time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.t0, tl.marks = t0, nil
}

// Mark records what, the first time only, at the given time.
func (tl *Timeline) Mark(what string, at time.Time) {
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

// Has reports whether what has been marked.
func (tl *Timeline) Has(what string) (time.Duration, bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, m := range tl.marks {
		if m.what == what {
			return m.at, true
		}
	}
	return 0, false
}

// String lists the timeline's marks, one a line, each with its time since the start.
func (tl *Timeline) String() string {
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
	TLXRCreated        = "InferenceGateway created"
	tlObjectsCreated   = "all gateway Objects composed"
	tlGatewayAddress   = "Gateway has status.addresses"
	tlAnchorAccepted   = "anchor AIGatewayRoute Accepted"
	TLDeployment       = "Envoy Deployment created"
	TLMarker           = "ext-proc marker in the pod template"
	TLRolloutComplete  = "rollout complete (rule holds on the Deployment)"
	tlAllAvailable     = "all replicas available on the current template"
	TLObjectReady      = "envoy-deployment Object Ready=True"
	TLGatewayReady     = "InferenceGateway GatewayReady=True"
	TLRouteCreated     = "ModelRoute created"
	TLRouteObject      = "model AIGatewayRoute in the API server"
	TLRoutingReady     = "ModelRoute RoutingReady=True"
	TLKubeletReleased  = "kubelet stand-in released (pods may start)"
	TLMarkerPatchFirst = "AI Gateway patched its marker into the template"
)

// Transition is one change of a condition seen on an XR.
type Transition struct {
	At                      time.Time // when the watch saw it
	Status, Reason, Message string    // the condition after the change
	// RV is the object's resourceVersion at that change, 0 if unknown.
	// Written by one etcd, resourceVersions are its revisions, one counter
	// for every object (Kubernetes asks clients not to rely on that; the
	// suite runs its own etcd and reads them only to order writes of two
	// objects, which the watches' arrival times cannot do).
	RV int64
}

// revision is u's resourceVersion as an etcd revision, or 0.
func revision(u *unstructured.Unstructured) int64 {
	n, _ := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
	return n
}

// Deletion is one object the API server deleted.
type Deletion struct {
	At            time.Time // when the watch saw it
	Resource      string    // the object's resource, e.g. objects
	Namespace     string    // the object's namespace
	Name          string    // the object's name
	Allowed       bool      // whether an Allowance matched it
	AllowedReason string    // the matching Allowance's reason
}

// Allowance permits the deletion of matching objects.
type Allowance struct {
	Reason    string // why the deletion is expected, for the log
	Resource  string // the resource it matches, e.g. objects
	Namespace string // the namespace it matches
	Name      string // "" matches any name
	// Composite, when set, matches only objects labelled as composed
	// for that composite (LabelComposite): an Object a reconcile created
	// just before its composite's deletion has a name nobody knew.
	Composite string
	// ResourceName, when set, matches only Objects of that composition
	// resource name (AnnotationResourceName): a backend removed from a
	// route takes its Objects, whose names nobody chose.
	ResourceName string
	// ResourceNamePrefix, when set, matches only Objects whose
	// composition resource name starts with it: a fleet route's Objects on
	// one gateway (<gateway>/...), which Crossplane deletes with their
	// labels stripped when the gateway leaves the selection.
	ResourceNamePrefix string
}

// World watches the API server for the whole test: it checks the
// invariants on every event, keeps the timeline, the condition
// transitions of the XRs and every deletion.
type World struct {
	tb       testing.TB
	c        *Cluster
	Rule     *rollout.Rule // the function's rollout rule, to judge the envoy-deployment Object by
	TeamNS   string        // the team's namespace on the gateway cluster
	Timeline *Timeline     // what happened when, for the log

	watchers map[schema.GroupVersionResource]*watcher

	// Mu guards the fields below, which the watches' goroutines write.
	Mu         sync.Mutex
	allowances []Allowance
	deletions  []Deletion
	Violations []string // the invariants broken, each as a message
	reported   int      // violations already reported
	Checks     int      // agreement checks made on Object events
	gwTrans    []Transition
	objTrans   []Transition              // Ready of the envoy-deployment Object
	byRoute    map[string][]Transition   // RoutingReady of every ModelRoute, by namespace/name
	pending    map[string]*pendingReplay // conditions Crossplane replayed, not judged yet (replay.go)
	replays    []Replay
	suspect    *suspect                // GatewayReady=True beside unfinished rollout counters
	synced     map[string][]Transition // Synced of the gateway's Objects, by resource name
	Secrets    []SecretValue           // values no Object or XR may ever hold
	leaked     map[string]bool         // leaks already reported, by object and value
	Scanned    int                     // Object and XR observations checked for secrets
	events     map[string]int          // changes seen, by resource
	sidecar    sidecarState            // the seed's invariant (sidecar.go)
	spends     map[string][]spend      // breaker tokens spent, by ModelRoute (breaker.go)
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
	GVRObject, GVRAIRoute, GVRBackend, GVRAIBackend, GVRSecPolicy, GVRSecret, GVRNamespace,
	GVRGateway, GVREnvoyProxy, GVRTrafficPolicy, GVRClientPolicy, GVREGSecurityPolicy, GVRDeployment, GVRHTTPRoute,
	GVRInferenceGW, GVRModelRoute,
}

// Watch starts watching and waits until every watcher has listed once.
func (c *Cluster) Watch(ctx context.Context, tb testing.TB, rule *rollout.Rule, teamNS string) *World {
	w := &World{tb: tb, c: c, Rule: rule, TeamNS: teamNS, Timeline: &Timeline{},
		watchers: map[schema.GroupVersionResource]*watcher{}, synced: map[string][]Transition{}, leaked: map[string]bool{},
		events: map[string]int{}, byRoute: map[string][]Transition{}, pending: map[string]*pendingReplay{}, sidecar: sidecarState{
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
	w.watchers[GVRPod] = newWatcher(c, GVRPod,
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

// Allow permits deletions from now on.
func (w *World) Allow(a Allowance) {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	w.allowances = append(w.allowances, a)
}

func (w *World) violate(format string, args ...any) {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	w.Violations = append(w.Violations, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}

// Check fails the test for every invariant violation seen since the last
// check. Watch handlers never call t.Errorf themselves: they run on
// their own goroutines and may outlive a subtest.
func (w *World) Check(tb testing.TB) {
	tb.Helper()
	w.Mu.Lock()
	if sp := w.suspect; sp != nil && !sp.reported && time.Since(sp.since) > suspectGrace {
		sp.reported = true
		w.Violations = append(w.Violations, fmt.Sprintf("%s GatewayReady=True for %s with rollout counters of an unfinished rollout: %v",
			sp.since.Format("15:04:05.000"), time.Since(sp.since).Round(time.Second), sp.counters))
	}
	vs := w.Violations[w.reported:]
	w.reported = len(w.Violations)
	w.Mu.Unlock()
	for _, v := range vs {
		tb.Errorf("invariant violated: %s", v)
	}
}

// Deleted returns the deletions seen so far.
func (w *World) Deleted() []Deletion {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	return slices.Clone(w.deletions)
}

func (w *World) onDelete(gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	d := Deletion{At: time.Now(), Resource: gvr.Resource, Namespace: u.GetNamespace(), Name: u.GetName()}
	if gvr == GVRModelRoute {
		w.Mu.Lock()
		w.routeDeletedLocked(u.GetNamespace()+"/"+u.GetName(), d.At)
		w.Mu.Unlock()
	}
	if !w.relevant(gvr, u) {
		return
	}
	w.Mu.Lock()
	for _, a := range w.allowances {
		if a.Resource == gvr.Resource && a.Namespace == u.GetNamespace() && (a.Name == "" || a.Name == u.GetName()) &&
			(a.Composite == "" || a.Composite == u.GetLabels()[LabelComposite]) &&
			(a.ResourceName == "" || a.ResourceName == u.GetAnnotations()[AnnotationResourceName]) &&
			strings.HasPrefix(u.GetAnnotations()[AnnotationResourceName], a.ResourceNamePrefix) {
			d.Allowed, d.AllowedReason = true, a.Reason
			break
		}
	}
	w.deletions = append(w.deletions, d)
	w.Mu.Unlock()
	if !d.Allowed {
		what := ""
		if n := u.GetAnnotations()[AnnotationResourceName]; n != "" {
			what = fmt.Sprintf(" (%s of %s)", n, u.GetLabels()[LabelComposite])
		}
		w.violate("unexpected deletion of %s %s/%s%s", gvr.Resource, u.GetNamespace(), u.GetName(), what)
	}
}

// relevant reports whether an object belongs to the gateway or the model
// route: Secrets and Deployments of other namespaces, and namespaces other
// than the team's, are Crossplane's and the cluster's own business.
func (w *World) relevant(gvr schema.GroupVersionResource, u *unstructured.Unstructured) bool {
	switch gvr {
	case GVRNamespace:
		return u.GetName() == w.TeamNS || u.GetName() == TeamControlNS || u.GetName() == ObjectNS || u.GetName() == GatewayNS || u.GetName() == EnvoyGatewayNS
	case GVRSecret:
		return u.GetNamespace() == w.TeamNS || u.GetNamespace() == TeamControlNS
	case GVRDeployment:
		return u.GetNamespace() == EnvoyGatewayNS
	}
	return true
}

func (w *World) onChange(gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	now := time.Now()
	w.Mu.Lock()
	w.events[gvr.Resource]++
	w.Mu.Unlock()
	// Every event is an observation of the sidecar invariant, checked once
	// the event's own state (a ModelRoute's RoutingReady) is recorded.
	defer func() {
		w.Mu.Lock()
		w.checkSidecarLocked()
		w.Mu.Unlock()
	}()
	switch gvr {
	case GVRObject, GVRInferenceGW, GVRModelRoute:
		w.checkSecrets(gvr, u)
		w.recordSpend(u.GetKind(), u, now)
	}
	switch gvr {
	case GVRObject:
		w.onObject(u, now)
	case GVRGateway:
		if addrs, _, _ := unstructured.NestedSlice(u.Object, "status", "addresses"); len(addrs) > 0 && u.GetNamespace() == GatewayNS {
			w.Timeline.Mark(tlGatewayAddress, now)
		}
	case GVRAIRoute:
		if ConditionStatus(u, "Accepted") == "True" && u.GetNamespace() == GatewayNS {
			w.Timeline.Mark(tlAnchorAccepted, now)
		}
		if u.GetNamespace() == w.TeamNS && u.GetName() == RouteName {
			w.Timeline.Mark(TLRouteObject, now)
		}
	case GVRDeployment:
		if u.GetNamespace() != EnvoyGatewayNS {
			return
		}
		w.Timeline.Mark(TLDeployment, now)
		if u.GetLabels()[LabelOwningGatewayName] == GatewayXRName {
			w.onDeploymentMarkers(u, now)
		}
		for _, k := range templateMarkers {
			if v, _, _ := unstructured.NestedString(u.Object, "spec", "template", "metadata", "annotations", k); v != "" {
				w.Timeline.Mark(TLMarker, now)
			}
		}
		if v, err := w.Rule.Evaluate(u.Object); err == nil && v.Ready {
			w.Timeline.Mark(TLRolloutComplete, now)
			want := Int64At(u.Object, "spec", "replicas")
			if Int64At(u.Object, "status", "availableReplicas") == want && Int64At(u.Object, "status", "updatedReplicas") == want && Int64At(u.Object, "status", "replicas") == want {
				w.Timeline.Mark(tlAllAvailable, now)
			}
		}
	case GVRInferenceGW:
		// A second InferenceGateway (scenario 5d) has its own conditions.
		if u.GetName() == GatewayXRName {
			w.onGateway(u, now)
		}
	case GVRModelRoute:
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
func (w *World) onObject(u *unstructured.Unstructured, now time.Time) {
	if u.GetNamespace() == ObjectNS && u.GetLabels()[LabelComposite] == GatewayXRName {
		n := 0
		for _, ou := range w.watchers[GVRObject].list() {
			if ou.GetNamespace() == ObjectNS && ou.GetLabels()[LabelComposite] == GatewayXRName {
				n++
			}
		}
		if n == len(gateway.Resources) {
			w.Timeline.Mark(tlObjectsCreated, now)
		}
	}
	if res := u.GetAnnotations()[AnnotationResourceName]; u.GetNamespace() == ObjectNS && res != "" {
		st, reason := ConditionStatus(u, "Synced"), ConditionReason(u, "Synced")
		msg, _ := Condition(u, "Synced")["message"].(string)
		w.Mu.Lock()
		ts := w.synced[res]
		if n := len(ts); st != "" && (n == 0 || ts[n-1].Status != st || ts[n-1].Reason != reason) {
			w.synced[res] = append(ts, Transition{At: now, Status: st, Reason: reason, Message: msg})
		}
		w.Mu.Unlock()
	}
	if u.GetAnnotations()[AnnotationResourceName] != gateway.ResourceEnvoyDeployment {
		return
	}
	manifest, ok, _ := unstructured.NestedMap(u.Object, "status", "atProvider", "manifest")
	ready := Condition(u, "Ready")
	if !ok || ready == nil {
		return
	}
	if q, _, _ := unstructured.NestedString(u.Object, "spec", "readiness", "celQuery"); q != w.Rule.Expression {
		w.violate("the envoy-deployment Object's celQuery is not the function's rollout rule:\n got %s\nwant %s", q, w.Rule.Expression)
	}
	v, err := w.Rule.Evaluate(manifest)
	if err != nil {
		w.violate("cannot evaluate the rollout rule on the Object's manifest: %v", err)
		return
	}
	w.Mu.Lock()
	w.Checks++
	w.Mu.Unlock()
	if (ready["status"] == "True") != v.Ready {
		w.violate("envoy-deployment Object Ready=%v (%v) but the function's rule says %v %v on the same manifest (generation %d, status %v)",
			ready["status"], ready["reason"], v.Ready, v.Failed, Int64At(manifest, "metadata", "generation"), manifest["status"])
	}
	if v.Ready {
		w.Timeline.Mark(TLObjectReady, now)
	}
	st, _ := ready["status"].(string)
	w.Mu.Lock()
	if n := len(w.objTrans); n == 0 || w.objTrans[n-1].Status != st {
		w.objTrans = append(w.objTrans, Transition{At: now, Status: st})
	}
	w.Mu.Unlock()
}

// RouteTransitions returns the recorded RoutingReady changes of the
// ModelRoute ns/name.
func (w *World) RouteTransitions(ns, name string) []Transition {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	w.promoteLocked(time.Now())
	return slices.Clone(w.byRoute[ns+"/"+name])
}

// ObjectTransitions returns the recorded Ready changes of the
// envoy-deployment Object.
func (w *World) ObjectTransitions() []Transition {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	return slices.Clone(w.objTrans)
}

// onGateway records GatewayReady transitions and checks that GatewayReady
// is True only with rollout counters that describe a finished rollout.
//
// Every change is recorded, a replay of Crossplane's included
// (replay.go): the judge's grace would hold a gateway verdict back
// from the checks that read the transitions right after the API server
// showed it (followRollout).
func (w *World) onGateway(u *unstructured.Unstructured, now time.Time) {
	st, reason := ConditionStatus(u, gateway.ConditionType), ConditionReason(u, gateway.ConditionType)
	msg, _ := Condition(u, gateway.ConditionType)["message"].(string)
	w.Mu.Lock()
	if last := lastOf(w.gwTrans); st != "" && (last == nil || last.Status != st || last.Reason != reason) {
		w.gwTrans = append(w.gwTrans, Transition{At: now, Status: st, Reason: reason, Message: msg, RV: revision(u)})
	}
	w.Mu.Unlock()
	if st != "True" {
		w.clearSuspect()
		return
	}
	w.Timeline.Mark(TLGatewayReady, now)
	if reason != gatewayready.ReasonReady {
		w.violate("GatewayReady=True with reason %q, want %q", reason, gatewayready.ReasonReady)
	}
	r, ok, _ := unstructured.NestedMap(u.Object, "status", "rollout")
	if ok && Int64At(r, "observedGeneration") >= Int64At(r, "generation") &&
		Int64At(r, "updatedReplicas") == Int64At(r, "replicas") && Int64At(r, "availableReplicas") >= 1 {
		w.clearSuspect()
		return
	}
	w.Mu.Lock()
	defer w.Mu.Unlock()
	switch sp := w.suspect; {
	case sp == nil:
		w.suspect = &suspect{since: now, counters: r}
	case !sp.reported && now.Sub(sp.since) > suspectGrace:
		sp.reported = true
		w.Violations = append(w.Violations, fmt.Sprintf("%s GatewayReady=True for %s with rollout counters of an unfinished rollout: %v",
			sp.since.Format("15:04:05.000"), now.Sub(sp.since).Round(time.Second), r))
	}
}

func (w *World) clearSuspect() {
	w.Mu.Lock()
	w.suspect = nil
	w.Mu.Unlock()
}

// onRoute records RoutingReady transitions; not one Crossplane replayed
// from its cache, unless it stands (replay.go). The sidecar invariant
// takes the condition as the watch shows it, replays included.
func (w *World) onRoute(u *unstructured.Unstructured, now time.Time) {
	st, reason := ConditionStatus(u, "RoutingReady"), ConditionReason(u, "RoutingReady")
	msg, _ := Condition(u, "RoutingReady")["message"].(string)
	cur := Transition{At: now, Status: st, Reason: reason, Message: msg, RV: revision(u)}
	k := u.GetNamespace() + "/" + u.GetName()
	w.Mu.Lock()
	defer w.Mu.Unlock()
	pending := w.judgeLocked(k, "RoutingReady", cur, u, now)
	w.sidecar.routingReady[k] = st == "True"
	w.sidecar.replayedTrue[k] = pending && st == "True"
	w.sidecar.everTrue = w.sidecar.everTrue || st == "True"
	if last := lastOf(w.byRoute[k]); last != nil && last.Status == "True" && k == TeamControlNS+"/"+RouteName {
		w.Timeline.Mark(TLRoutingReady, last.At)
	}
}

// lastOf returns the last of ts, or nil.
func lastOf(ts []Transition) *Transition {
	if len(ts) == 0 {
		return nil
	}
	return &ts[len(ts)-1]
}

// SyncedTransitions renders the Synced changes of the gateway's Objects.
func (w *World) SyncedTransitions(t0 time.Time) string {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	var sb strings.Builder
	for _, res := range gateway.Resources {
		fmt.Fprintf(&sb, " %s:\n%s", res, FormatTransitions(t0, w.synced[res]))
	}
	return sb.String()
}

// LastTransition returns when GatewayReady or RoutingReady last changed.
func (w *World) LastTransition() time.Time {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	w.promoteLocked(time.Now())
	var last time.Time
	for _, ts := range [][]Transition{w.gwTrans, w.byRoute[TeamControlNS+"/"+RouteName]} {
		if n := len(ts); n > 0 && ts[n-1].At.After(last) {
			last = ts[n-1].At
		}
	}
	return last
}

// Transitions returns the recorded GatewayReady and RoutingReady changes.
func (w *World) Transitions() (gw, rt []Transition) {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	w.promoteLocked(time.Now())
	return slices.Clone(w.gwTrans), slices.Clone(w.byRoute[TeamControlNS+"/"+RouteName])
}

// FormatTransitions lists ts, one a line, each with its time since t0.
func FormatTransitions(t0 time.Time, ts []Transition) string {
	var sb strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&sb, "  %7.2fs  %s (%s): %s\n", t.At.Sub(t0).Seconds(), t.Status, t.Reason, t.Message)
	}
	return sb.String()
}

// EventCounts renders how many changes the watch saw of each resource.
func (w *World) EventCounts() string {
	w.Mu.Lock()
	defer w.Mu.Unlock()
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

// AllRouteTransitions returns the recorded RoutingReady changes of every
// ModelRoute, by namespace/name.
func (w *World) AllRouteTransitions() map[string][]Transition {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	w.promoteLocked(time.Now())
	out := make(map[string][]Transition, len(w.byRoute))
	for k, v := range w.byRoute {
		out[k] = slices.Clone(v)
	}
	return out
}
