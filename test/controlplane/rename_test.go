package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/test/internal/toolchain"
)

// previousRevision is the last commit of the function that named every
// backend's objects <route>-<backend> (before internal/names/backend.go):
// the function users upgrade from.
const previousRevision = "8c3c397f79792adb5810192ac55b1639859a355b"

// The ModelRoute of scenario 5b3 and its backend, whose name holds a "-":
// the function renames its objects.
const (
	renamedRoute   = "renamed"
	renamedBackend = "vllm-a"
)

// buildPreviousFunction builds the function at previousRevision from the
// repository's own history (git archive, so the working tree is never
// touched), cached under bin/controlplane like the other binaries. A clone
// without that history (a shallow one) cannot: the function is then built
// from this tree with the naming it had then (legacyNamesOverlay), which
// is the part of it that the scenario upgrades from.
func buildPreviousFunction(ctx context.Context, tb testing.TB, root string) string {
	tb.Helper()
	out := filepath.Join(root, "bin", "controlplane", "function-"+previousRevision[:12])
	if _, err := os.Stat(out); err == nil {
		tb.Logf("build the function at %s: cached at %s", previousRevision[:12], out)
		return out
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if _, err := os.Stat(out); err == nil {
		return out
	}
	start := time.Now()
	src := tb.TempDir()
	if err := archiveAt(ctx, root, previousRevision, src); err != nil {
		tb.Logf("cannot read the function at %s from the repository's history (%v); building this tree with the backend names it gave instead", previousRevision[:12], err)
		bin, err := toolchain.Function(tb.TempDir(), legacyNamesOverlay(tb, root))
		if err != nil {
			tb.Fatalf("cannot build the function with the backend names of %s: %v", previousRevision[:12], err)
		}
		return bin
	}
	if err := toolchain.Build(ctx, src, out, "./cmd/function"); err != nil {
		tb.Fatalf("cannot build the function at %s: %v", previousRevision, err)
	}
	tb.Logf("build the function at %s: built in %s", previousRevision[:12], time.Since(start).Round(time.Second))
	return out
}

// archiveAt extracts the repository root's tree at rev into dir.
func archiveAt(ctx context.Context, root, rev, dir string) error {
	archive := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", rev)
	extract := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	extract.Stdin = pipe
	var stderr bytes.Buffer
	archive.Stderr = &stderr
	if err := extract.Start(); err != nil {
		return err
	}
	if err := archive.Run(); err != nil {
		_ = extract.Wait()
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return extract.Wait()
}

// legacyNamesOverlay is the go build flag of an overlay of
// internal/names/backend.go under which every backend's objects have the
// names the function gave before (<route>-<backend>) and none is renamed.
func legacyNamesOverlay(tb testing.TB, root string) string {
	tb.Helper()
	src := filepath.Join(root, "internal", "names", "backend.go")
	body, err := os.ReadFile(src)
	must(tb, err)
	s := string(body)
	for _, e := range []edit{
		{old: "func BackendObject(route, backend string) string {\n", new: "func BackendObject(route, backend string) string {\n\treturn LegacyBackendObject(route, backend)\n"},
		{old: "func BackendCA(route, backend string) string {\n", new: "func BackendCA(route, backend string) string {\n\treturn LegacyBackendCA(route, backend)\n"},
		{old: "func BackendRenamed(route, backend string) bool {\n", new: "func BackendRenamed(route, backend string) bool {\n\treturn false\n"},
	} {
		if strings.Count(s, e.old) != 1 {
			tb.Fatalf("cannot give the function its former backend names: %q is not in %s once", e.old, src)
		}
		s = strings.Replace(s, e.old, e.new, 1)
	}
	dir := tb.TempDir()
	broken := filepath.Join(dir, "backend.go")
	writeFile(tb, broken, []byte(s))
	ov, err := json.Marshal(map[string]map[string]string{"Replace": {src: broken}})
	must(tb, err)
	path := filepath.Join(dir, "overlay.json")
	writeFile(tb, path, ov)
	return "-overlay=" + path
}

// swapFunction stops the function and serves bin in its place, on the same
// port with the same certificates: an upgrade (or a downgrade) of the
// function's package, as Crossplane's runtime would roll it.
func (sc *scenarios) swapFunction(t *testing.T, bin string) {
	t.Helper()
	c := sc.c
	p := c.ps.latest("function")
	args := slices.Clone(p.cmd.Args[1:])
	p.stop(5 * time.Second)
	fn := c.ps.start("function", nil, bin, args...)
	must(t, waitFor(sc.ctx, fn, 100*time.Millisecond, "the function's gRPC port", listening(c.functionPort)))
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
}

// watchTargets starts a targetWatch on the ModelRoute route.
func (sc *scenarios) watchTargets(route string) *targetWatch {
	ctx, cancel := context.WithCancel(sc.ctx)
	tw := &targetWatch{stop: cancel, done: make(chan struct{})}
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
			if r, err := sc.get(ctx, gvrAIRoute, sc.w.teamNS, route); err == nil {
				refs := ruleBackendRefs(r)
				if s := fmt.Sprint(refs); s != last {
					last = s
					tw.mu.Lock()
					tw.names = append(tw.names, s)
					tw.mu.Unlock()
				}
				for _, n := range refs {
					if _, err := sc.get(ctx, gvrAIBackend, sc.w.teamNS, n); apierrors.IsNotFound(err) {
						fault("the AIGatewayRoute %s names the AIServiceBackend %s, which does not exist", route, n)
					}
				}
			}
			if h, err := sc.get(ctx, gvrHTTPRoute, sc.w.teamNS, route); err == nil {
				for _, n := range ruleBackendRefs(h) {
					if _, err := sc.get(ctx, gvrBackend, sc.w.teamNS, n); apierrors.IsNotFound(err) {
						fault("the HTTPRoute %s names the Backend %s, which does not exist", route, n)
					}
				}
			}
			if mr, err := sc.get(ctx, gvrModelRoute, teamControlNS, route); err == nil && conditionStatus(mr, "RoutingReady") == "False" {
				fault("the ModelRoute %s is RoutingReady=False (%s): %v", route, conditionReason(mr, "RoutingReady"), condition(mr, "RoutingReady")["message"])
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
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return slices.Clone(tw.faults), slices.Clone(tw.names)
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

// backendRenamed is scenario 5b3 (issue 45): a ModelRoute served by the
// previous function, whose backend vllm-a's objects it named renamed-vllm-a,
// after an upgrade to this one, which names them renamed-vllm.a so that no
// other route's can share them (internal/names/backend.go). The new
// objects are composed beside the old, the route moves to them once they
// are on the gateway cluster, and only then are the old ones deleted. All
// along, every AIServiceBackend and Backend the serving route names
// exists, and RoutingReady stays True (watchTargets); the world's watch
// allows the deletion of the old objects alone.
func (sc *scenarios) backendRenamed(t *testing.T) {
	c, w := sc.c, sc.w
	oldName, newName := names.LegacyBackendObject(renamedRoute, renamedBackend), names.BackendObject(renamedRoute, renamedBackend)
	if oldName == newName {
		t.Fatalf("the backend %q is not renamed (%s): the scenario would prove nothing", renamedBackend, newName)
	}
	previous := c.bins["function-previous"]
	current := c.ps.latest("function").cmd.Path
	sc.swapFunction(t, previous)
	t.Logf("the function at %s serves", previousRevision[:12])

	r := plainRoute(renamedRoute, "renamed."+teamControlNS+".svc.cluster.local")
	r.Object["spec"].(map[string]any)["backends"].([]any)[0].(map[string]any)["name"] = renamedBackend
	c.apply(sc.ctx, r)
	sc.eventually(t, waitRoute, "the ModelRoute "+renamedRoute+" RoutingReady=True, its route naming "+oldName, func(ctx context.Context) string {
		mr, err := sc.get(ctx, gvrModelRoute, teamControlNS, renamedRoute)
		if err != nil {
			return err.Error()
		}
		if msg := wantCondition(mr, "RoutingReady", "True"); msg != "" {
			return msg
		}
		ar, err := sc.get(ctx, gvrAIRoute, w.teamNS, renamedRoute)
		if err != nil {
			return err.Error()
		}
		if got := ruleBackendRefs(ar); !slices.Equal(got, []string{oldName}) {
			return fmt.Sprintf("its AIGatewayRoute names %v, want [%s]", got, oldName)
		}
		return ""
	})

	tw := sc.watchTargets(renamedRoute)
	for _, a := range []allowance{
		{reason: "scenario 5b3 renames a backend: its old Backend goes once the route no longer names it", resource: "backends", namespace: w.teamNS, name: oldName},
		{reason: "scenario 5b3 renames a backend: its old AIServiceBackend goes once the route no longer names it", resource: "aiservicebackends", namespace: w.teamNS, name: oldName},
	} {
		w.allow(a)
	}
	// The Objects of the old names, by name: Crossplane's garbage
	// collector removes an Object's composite label before it deletes it
	// (crossplane v2.3.0 internal/controller/apiextensions/composite/
	// composition_functions.go, GarbageCollectComposedResources), and the
	// provider finishes the deletion at its own pace, maybe scenarios
	// later.
	for _, key := range []string{"backend-" + renamedBackend, "aibackend-" + renamedBackend} {
		o := sc.composedObject(sc.ctx, teamControlNS, renamedRoute, key)
		if o == nil {
			t.Fatalf("the previous function composed no %s Object", key)
		}
		w.allow(allowance{reason: "scenario 5b3 renames a backend: the Object of its old name goes", resource: "objects", namespace: teamControlNS, name: o.GetName()})
	}
	start := time.Now()
	sc.swapFunction(t, current)
	t.Log("this function serves")
	sc.eventually(t, waitRoute, "the route naming "+newName+" alone, and "+oldName+" gone from the gateway cluster", func(ctx context.Context) string {
		ar, err := sc.get(ctx, gvrAIRoute, w.teamNS, renamedRoute)
		if err != nil {
			return err.Error()
		}
		if got := ruleBackendRefs(ar); !slices.Equal(got, []string{newName}) {
			return fmt.Sprintf("its AIGatewayRoute names %v, want [%s]", got, newName)
		}
		if _, err := sc.get(ctx, gvrAIBackend, w.teamNS, oldName); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("the AIServiceBackend %s is still there (%v)", oldName, err)
		}
		if _, err := sc.get(ctx, gvrBackend, w.teamNS, oldName); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("the Backend %s is still there (%v)", oldName, err)
		}
		// Garbage collected: no longer labelled as the route's.
		for _, key := range []string{"backend-" + renamedBackend, "aibackend-" + renamedBackend} {
			if o := sc.composedObject(ctx, teamControlNS, renamedRoute, key); o != nil {
				return fmt.Sprintf("the Object %s (%s) is still the route's", o.GetName(), key)
			}
		}
		mr, err := sc.get(ctx, gvrModelRoute, teamControlNS, renamedRoute)
		if err != nil {
			return err.Error()
		}
		return wantCondition(mr, "RoutingReady", "True")
	})
	moved := time.Since(start)
	faults, seen := tw.end()
	keys := sc.objectKeys(sc.ctx, renamedRoute)
	for _, f := range faults {
		t.Errorf("while the backend's objects moved: %s", f)
	}
	t.Logf("the route moved from %s to %s in %s after the upgrade; its backendRefs were, in turn: %v; its Objects are %v", oldName, newName, moved.Round(time.Millisecond), seen, keys)
	sc.sp.record("backend-renamed", "moved-after-upgrade", seconds(moved))

	why := "scenario 5b3 deletes its ModelRoute"
	for _, res := range []string{"backends", "aiservicebackends"} {
		w.allow(allowance{reason: why + ": its objects on the gateway cluster go with it", resource: res, namespace: w.teamNS, name: newName})
	}
	// Any Object of the route, by its label: one a reconcile created just
	// before the deletion has a name nobody listed (allowance.composite).
	w.allow(allowance{reason: why + ": its Objects go with it", resource: "objects", namespace: teamControlNS, composite: renamedRoute})
	sc.deleteRoute(t, renamedRoute, why)
	sc.noDeletions(t)
	w.check(t)
}

// objectKeys are the composition resource names of the composite's Objects.
func (sc *scenarios) objectKeys(ctx context.Context, composite string) []string {
	l, err := sc.c.dyn.Resource(gvrObject).Namespace(teamControlNS).List(ctx, metav1.ListOptions{LabelSelector: labelComposite + "=" + composite})
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, o := range l.Items {
		out = append(out, o.GetAnnotations()[annotationResourceName])
	}
	slices.Sort(out)
	return out
}

// TestLegacyNamesOverlayCompiles builds the function with the former
// backend names, which scenario 5b3 upgrades from in a clone without the
// repository's history, so that the fallback never goes stale unseen.
func TestLegacyNamesOverlayCompiles(t *testing.T) {
	root, err := toolchain.Root()
	must(t, err)
	if _, err := toolchain.Function(t.TempDir(), legacyNamesOverlay(t, root)); err != nil {
		t.Errorf("cannot build the function with its former backend names: %v", err)
	}
}
