package controlplane

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// The ModelRoute of scenario 5b3 and its backend, whose name holds a "-":
// the function renames its objects.
const (
	renamedRoute   = "renamed"
	renamedBackend = "vllm-a"
)

// backendRenamed is scenario 5b3 (issue 45): a ModelRoute served by the
// previous function, whose backend vllm-a's objects it named renamed-vllm-a,
// after an upgrade to this one, which names them renamed-vllm.a so that no
// other route's can share them (internal/names/backend.go). The new
// objects are composed beside the old, the route moves to them once they
// are on the gateway cluster, and only then are the old ones deleted. All
// along, every AIServiceBackend and Backend the serving route names
// exists, and RoutingReady stays True (watchTargets); on the control plane
// the route's Object names the new objects only after the provider has
// observed them (watchOrder); the world's watch allows the deletion of the
// old objects alone.
func (sc *scenarios) backendRenamed(t *testing.T) {
	c, w := sc.c, sc.w
	oldName, newName := names.LegacyBackendObject(renamedRoute, renamedBackend), names.BackendObject(renamedRoute, renamedBackend)
	if oldName == newName {
		t.Fatalf("the backend %q is not renamed (%s): the scenario would prove nothing", renamedBackend, newName)
	}
	previous := c.Bins["function-previous"]
	current := c.Procs.Latest("function").Cmd.Path
	sc.swapFunction(t, previous)
	t.Logf("the function at %s serves", previousRevision[:12])

	r := plainRoute(renamedRoute, "renamed."+harness.TeamControlNS+".svc.cluster.local")
	r.Object["spec"].(map[string]any)["backends"].([]any)[0].(map[string]any)["name"] = renamedBackend
	c.Apply(sc.ctx, r)
	sc.eventually(t, waitRoute, "the ModelRoute "+renamedRoute+" RoutingReady=True, its route naming "+oldName, func(ctx context.Context) string {
		mr, err := sc.get(ctx, harness.GVRModelRoute, harness.TeamControlNS, renamedRoute)
		if err != nil {
			return err.Error()
		}
		if msg := wantCondition(mr, "RoutingReady", "True"); msg != "" {
			return msg
		}
		ar, err := sc.get(ctx, harness.GVRAIRoute, w.TeamNS, renamedRoute)
		if err != nil {
			return err.Error()
		}
		if got := ruleBackendRefs(ar); !slices.Equal(got, []string{oldName}) {
			return fmt.Sprintf("its AIGatewayRoute names %v, want [%s]", got, oldName)
		}
		return ""
	})

	tw := sc.watchTargets(renamedRoute)
	for _, a := range []harness.Allowance{
		{Reason: "scenario 5b3 renames a backend: its old Backend goes once the route no longer names it", Resource: "backends", Namespace: w.TeamNS, Name: oldName},
		{Reason: "scenario 5b3 renames a backend: its old AIServiceBackend goes once the route no longer names it", Resource: "aiservicebackends", Namespace: w.TeamNS, Name: oldName},
	} {
		w.Allow(a)
	}
	// The Objects of the old names, by name: Crossplane's garbage
	// collector removes an Object's composite label before it deletes it
	// (crossplane v2.3.0 internal/controller/apiextensions/composite/
	// composition_functions.go, GarbageCollectComposedResources), and the
	// provider finishes the deletion at its own pace, maybe scenarios
	// later.
	for _, key := range []string{"backend-" + renamedBackend, "aibackend-" + renamedBackend} {
		o := sc.composedObject(sc.ctx, harness.TeamControlNS, renamedRoute, key)
		if o == nil {
			t.Fatalf("the previous function composed no %s Object", key)
		}
		w.Allow(harness.Allowance{Reason: "scenario 5b3 renames a backend: the Object of its old name goes", Resource: "objects", Namespace: harness.TeamControlNS, Name: o.GetName()})
	}
	start := time.Now()
	sc.swapFunction(t, current)
	t.Log("this function serves")
	// Nothing makes Crossplane reconcile a resting ModelRoute when its
	// function is upgraded: the route watches its composed resources and
	// itself, not the Function, so the new function first sees it at the
	// route's next watch event or at its TTL, ten minutes for a ready route
	// (route.ReadyRequeue), longer than the wait. So the scenario starts
	// that reconcile itself, as `kubectl annotate` would,
	// again every 15 s: an event Crossplane's circuit breaker holds back
	// gets through within its 30 s half-open interval.
	stopNudging := sc.nudge(t, renamedRoute, 15*time.Second)
	sc.eventually(t, waitRoute, "the route naming "+newName+" alone, and "+oldName+" gone from the gateway cluster", func(ctx context.Context) string {
		ar, err := sc.get(ctx, harness.GVRAIRoute, w.TeamNS, renamedRoute)
		if err != nil {
			return err.Error()
		}
		if got := ruleBackendRefs(ar); !slices.Equal(got, []string{newName}) {
			return fmt.Sprintf("its AIGatewayRoute names %v, want [%s]", got, newName)
		}
		if _, err := sc.get(ctx, harness.GVRAIBackend, w.TeamNS, oldName); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("the AIServiceBackend %s is still there (%v)", oldName, err)
		}
		if _, err := sc.get(ctx, harness.GVRBackend, w.TeamNS, oldName); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("the Backend %s is still there (%v)", oldName, err)
		}
		// Garbage collected: no longer labelled as the route's.
		for _, key := range []string{"backend-" + renamedBackend, "aibackend-" + renamedBackend} {
			if o := sc.composedObject(ctx, harness.TeamControlNS, renamedRoute, key); o != nil {
				return fmt.Sprintf("the Object %s (%s) is still the route's", o.GetName(), key)
			}
		}
		mr, err := sc.get(ctx, harness.GVRModelRoute, harness.TeamControlNS, renamedRoute)
		if err != nil {
			return err.Error()
		}
		return wantCondition(mr, "RoutingReady", "True")
	})
	moved := time.Since(start)
	stopNudging()
	faults, seen := tw.end()
	keys := sc.objectKeys(sc.ctx, renamedRoute)
	for _, f := range faults {
		t.Errorf("while the backend's objects moved: %s", f)
	}
	t.Logf("the route moved from %s to %s in %s after the upgrade; its backendRefs were, in turn: %v; its Objects are %v", oldName, newName, moved.Round(time.Millisecond), seen, keys)
	sc.sp.Record("backend-renamed", "moved-after-upgrade", seconds(moved))

	why := "scenario 5b3 deletes its ModelRoute"
	for _, res := range []string{"backends", "aiservicebackends"} {
		w.Allow(harness.Allowance{Reason: why + ": its objects on the gateway cluster go with it", Resource: res, Namespace: w.TeamNS, Name: newName})
	}
	// Any Object of the route, by its label: one a reconcile created just
	// before the deletion has a name nobody listed (allowance.composite).
	w.Allow(harness.Allowance{Reason: why + ": its Objects go with it", Resource: "objects", Namespace: harness.TeamControlNS, Composite: renamedRoute})
	sc.deleteRoute(t, renamedRoute, why)
	sc.noDeletions(t)
	w.Check(t)
}

// swapFunction stops the function and serves bin in its place, on the same
// port with the same certificates: an upgrade (or a downgrade) of the
// function's package, as Crossplane's runtime would roll it.
func (sc *scenarios) swapFunction(t *testing.T, bin string) {
	t.Helper()
	c := sc.c
	p := c.Procs.Latest("function")
	args := slices.Clone(p.Cmd.Args[1:])
	p.Stop(5 * time.Second)
	fn := c.Procs.Start("function", nil, bin, args...)
	harness.Must(t, harness.WaitFor(sc.ctx, fn, 100*time.Millisecond, "the function's gRPC port", harness.Listening(c.FunctionPort)))
}

// targetWatch polls, every 100 ms while a scenario runs, what a serving
// route names on the gateway cluster: every AIServiceBackend its
// AIGatewayRoute names, and every Backend its generated HTTPRoute names,
// must exist, and its RoutingReady must not be False.
type targetWatch struct {
	mu     sync.Mutex
	faults []string
	names  []string // the route's backendRefs, each time they changed
	stop   context.CancelFunc
	done   chan struct{}
	// order is the control plane's side of the move (watchOrder).
	order objectOrder
	// watching ends with watchOrder's watch.
	watching chan struct{}
}

// objectOrder is when, in the API server's resourceVersions, the route's
// Object first named the renamed backend's new objects, and when the
// provider first observed each of their new Objects' remote object
// (status.atProvider.manifest): the function may name them only after.
// The API server orders the resourceVersions of the objects of one
// resource (apimachinery v0.36.2 pkg/util/resourceversion,
// CompareResourceVersion), and all of these are Objects; a watch delivers
// every write.
type objectOrder struct {
	routeNamed string            // "": not yet
	live       map[string]string // by composition resource name
	err        error
}

// watchTargets starts a targetWatch on the ModelRoute route.
func (sc *scenarios) watchTargets(route string) *targetWatch {
	ctx, cancel := context.WithCancel(sc.ctx)
	tw := &targetWatch{stop: cancel, done: make(chan struct{}), watching: make(chan struct{}), order: objectOrder{live: map[string]string{}}}
	go sc.watchOrder(ctx, tw, route)
	fault := func(format string, a ...any) {
		tw.mu.Lock()
		defer tw.mu.Unlock()
		if len(tw.faults) < 20 {
			tw.faults = append(tw.faults, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, a...))
		}
	}
	go func() {
		defer close(tw.done)
		var last string
		for ctx.Err() == nil {
			if r, err := sc.get(ctx, harness.GVRAIRoute, sc.w.TeamNS, route); err == nil {
				refs := ruleBackendRefs(r)
				if s := fmt.Sprint(refs); s != last {
					last = s
					tw.mu.Lock()
					tw.names = append(tw.names, s)
					tw.mu.Unlock()
				}
				for _, n := range refs {
					if _, err := sc.get(ctx, harness.GVRAIBackend, sc.w.TeamNS, n); apierrors.IsNotFound(err) {
						fault("the AIGatewayRoute %s names the AIServiceBackend %s, which does not exist", route, n)
					}
				}
			}
			if h, err := sc.get(ctx, harness.GVRHTTPRoute, sc.w.TeamNS, route); err == nil {
				for _, n := range ruleBackendRefs(h) {
					if _, err := sc.get(ctx, harness.GVRBackend, sc.w.TeamNS, n); apierrors.IsNotFound(err) {
						fault("the HTTPRoute %s names the Backend %s, which does not exist", route, n)
					}
				}
			}
			// A condition Crossplane re-applied from its cache is not the
			// function's verdict (harness/replay.go; the world judges those
			// by how long they stand).
			if mr, err := sc.get(ctx, harness.GVRModelRoute, harness.TeamControlNS, route); err == nil && harness.ConditionStatus(mr, "RoutingReady") == "False" && !harness.Replayed(mr, "RoutingReady") {
				fault("the ModelRoute %s is RoutingReady=False (%s): %v", route, harness.ConditionReason(mr, "RoutingReady"), harness.Condition(mr, "RoutingReady")["message"])
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return tw
}

// end stops the watch and returns its faults and the backendRefs it saw.
func (tw *targetWatch) end() (faults, seen []string) {
	tw.stop()
	<-tw.done
	<-tw.watching
	tw.mu.Lock()
	defer tw.mu.Unlock()
	faults = slices.Clone(tw.faults)
	o := tw.order
	switch {
	case o.err != nil:
		faults = append(faults, "cannot watch the route's Objects: "+o.err.Error())
	case o.routeNamed == "":
		faults = append(faults, "the route's Object never named the backend's new objects")
	}
	for _, k := range renamedKeys {
		if o.routeNamed == "" {
			break
		}
		at := o.live[k]
		if at == "" {
			faults = append(faults, fmt.Sprintf("the route's Object named the backend's new objects at resourceVersion %s, and the provider never observed the remote object of the Object %s", o.routeNamed, k))
			continue
		}
		switch c, err := resourceversion.CompareResourceVersion(at, o.routeNamed); {
		case err != nil:
			faults = append(faults, "cannot order the route's Objects' writes: "+err.Error())
		case c > 0:
			faults = append(faults, fmt.Sprintf("the route's Object named the backend's new objects at resourceVersion %s, before the provider observed the remote object of the Object %s (at %s)", o.routeNamed, k, at))
		}
	}
	return faults, slices.Clone(tw.names)
}

// renamedKeys are the composition resource names of the renamed backend's
// new Backend and AIServiceBackend: its name and ".v2" (internal/route,
// names.go).
var renamedKeys = []string{"backend-" + renamedBackend + ".v2", "aibackend-" + renamedBackend + ".v2"}

// watchOrder records tw.order from a watch of the Objects of the ModelRoute
// route on the control plane. Unlike the 100 ms look at the gateway
// cluster, the order it records does not depend on which Object the
// provider happens to apply first: a route Object that names the new
// objects in the very write that creates their Objects comes before the
// provider's first observation of them, whatever the timing.
func (sc *scenarios) watchOrder(ctx context.Context, tw *targetWatch, route string) {
	defer close(tw.watching)
	record := func(err error) {
		tw.mu.Lock()
		defer tw.mu.Unlock()
		tw.order.err = err
	}
	newName := names.BackendObject(route, renamedBackend)
	wi, err := sc.c.Dyn.Resource(harness.GVRObject).Namespace(harness.TeamControlNS).Watch(ctx, metav1.ListOptions{LabelSelector: harness.LabelComposite + "=" + route})
	if err != nil {
		record(err)
		return
	}
	defer wi.Stop()
	for ev := range wi.ResultChan() {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		rv := u.GetResourceVersion()
		key := u.GetAnnotations()[harness.AnnotationResourceName]
		tw.mu.Lock()
		if m, _, _ := unstructured.NestedMap(u.Object, "spec", "forProvider", "manifest"); key == "route" && tw.order.routeNamed == "" &&
			slices.Contains(ruleBackendRefs(&unstructured.Unstructured{Object: m}), newName) {
			tw.order.routeNamed = rv
		}
		if _, observed, _ := unstructured.NestedMap(u.Object, "status", "atProvider", "manifest"); observed && slices.Contains(renamedKeys, key) && tw.order.live[key] == "" {
			tw.order.live[key] = rv
		}
		tw.mu.Unlock()
	}
}

// ruleBackendRefs names the backendRefs of a route's rules, in order.
func ruleBackendRefs(u *unstructured.Unstructured) []string {
	var out []string
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	for _, r := range rules {
		rm, _ := r.(map[string]any)
		refs, _, _ := unstructured.NestedSlice(rm, "backendRefs")
		for _, x := range refs {
			xm, _ := x.(map[string]any)
			if n, _ := xm["name"].(string); n != "" {
				out = append(out, n)
			}
		}
	}
	return out
}

// objectKeys are the composition resource names of the composite's Objects.
func (sc *scenarios) objectKeys(ctx context.Context, composite string) []string {
	l, err := sc.c.Dyn.Resource(harness.GVRObject).Namespace(harness.TeamControlNS).List(ctx, metav1.ListOptions{LabelSelector: harness.LabelComposite + "=" + composite})
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, o := range l.Items {
		out = append(out, o.GetAnnotations()[harness.AnnotationResourceName])
	}
	slices.Sort(out)
	return out
}

// nudge changes an annotation of the ModelRoute name every interval until
// the returned stop is called, so that Crossplane reconciles it: an XR's
// own update is a watch event (crossplane v2.3.0
// internal/controller/apiextensions/definition/reconciler.go watches the
// XR with no predicate, through its circuit breaker's map function),
// which the function ignores.
func (sc *scenarios) nudge(t *testing.T, name string, interval time.Duration) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(sc.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 1; ; n++ {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"controlplane.modelplane.ai/nudge":"%d"}}}`, n)
			if _, err := sc.c.Dyn.Resource(harness.GVRModelRoute).Namespace(harness.TeamControlNS).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil && ctx.Err() == nil {
				t.Logf("cannot nudge the ModelRoute %s: %v", name, err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
		}
	}()
	return func() { cancel(); <-done }
}
