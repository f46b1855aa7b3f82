package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// AI Gateway v1.0.0 can lose the removal of its own finalizer, and then a
// ModelRoute's deletion hangs: envoyproxy/ai-gateway#2565, fixed by
// envoyproxy/ai-gateway#2566, neither in v1.0.0. Its handleFinalizer
// (internal/controller/controller.go) removes the finalizer with one
// client.Update of the object its Reconcile read from the informer's
// cache; when that Update conflicts it only logs the error and returns
// without one, so controller-runtime does not requeue the object. Its
// controllers take only the updates that change metadata.generation
// (TypedControllerBuilderForCRD's predicate.GenerationChangedPredicate),
// and the object's later changes (its status, the cache's resync) do not;
// only a generic event from a related controller's channel, which the
// predicate does not filter, reconciles it again, if one happens to come.
// So the object stays Terminating with the finalizer, and the
// provider-kubernetes Object that made it keeps its own finalizer until
// the object is gone (provider-kubernetes v1.4.1 and v1.3.1
// internal/controller/namespaced/object/object.go, Observe reports the object as existing
// until its Get is NotFound, and Crossplane's managed reconciler calls
// Delete again).
//
// One reconcile of the deletion is certain: a custom resource has no
// graceful deletion, so the API server sets its deletionTimestamp in
// markAsDeleting (k8s.io/apiserver v0.36.1 pkg/registry/generic/registry/
// store.go), which bumps metadata.generation. A lost finalizer therefore
// always leaves the log line below, and an AI Gateway finalizer held with
// no such line is something else, which the suite does not excuse.
// Restarting AI Gateway also releases it: on start its informers list every
// object as a create event, which the predicate lets through.

const (
	// aiGatewayFinalizer is the finalizer AI Gateway v1.0.0 puts on the
	// objects it reconciles (internal/controller/controller.go,
	// aiGatewayControllerFinalizer).
	aiGatewayFinalizer = "aigateway.envoyproxy.io/finalizer"

	// aiGatewayFinalizerLost is the message AI Gateway v1.0.0 logs when
	// its Update removing the finalizer fails (controller.go,
	// handleFinalizer).
	aiGatewayFinalizerLost = "Failed to remove finalizer from object"

	// upstreamFinalizerIssue names the upstream bug in what the suite logs.
	upstreamFinalizerIssue = "envoyproxy/ai-gateway#2565"

	// finalizerLostAfter is how long AI Gateway's finalizer must have
	// stayed on a deleting object before the suite applies the
	// workaround: long past the one reconcile the deletion causes, so
	// that a slow but working AI Gateway is never helped.
	finalizerLostAfter = 30 * time.Second
)

// aiGatewayFinalized are the kinds the function composes on which AI
// Gateway puts its finalizer (ai_gateway_route.go, ai_service_backend.go
// and backend_security_policy.go call handleFinalizer), by kind.
var aiGatewayFinalized = map[string]schema.GroupVersionResource{
	"AIGatewayRoute":        harness.GVRAIRoute,
	"AIServiceBackend":      harness.GVRAIBackend,
	"BackendSecurityPolicy": harness.GVRSecPolicy,
}

// lostFinalizer is an object on the gateway cluster whose deletion AI
// Gateway's lost finalizer removal holds.
type lostFinalizer struct {
	gvr       schema.GroupVersionResource
	namespace string
	name      string
	index     int       // of AI Gateway's finalizer in metadata.finalizers
	deleting  time.Time // the object's deletionTimestamp
	logLine   string    // AI Gateway's log line for the failed removal
}

// classifyLost decides whether remote, an object on the gateway cluster
// of the kind gvr names, is held only because AI Gateway lost the removal
// of its finalizer (see above). It returns the finding, or nil and why
// not, for the failure message. aigwLog is AI Gateway's log and aigwUp
// whether it is running.
func classifyLost(remote *unstructured.Unstructured, gvr schema.GroupVersionResource, aigwLog string, aigwUp bool, now time.Time) (*lostFinalizer, string) {
	if !slices.Contains(slices.Collect(maps.Values(aiGatewayFinalized)), gvr) {
		return nil, "not a kind AI Gateway finalizes"
	}
	dt := remote.GetDeletionTimestamp()
	if dt == nil {
		return nil, "not being deleted"
	}
	i := slices.Index(remote.GetFinalizers(), aiGatewayFinalizer)
	if i < 0 {
		return nil, fmt.Sprintf("deleting since %s without AI Gateway's finalizer", dt.UTC().Format(time.RFC3339))
	}
	if !aigwUp {
		return nil, "AI Gateway's finalizer stays, but AI Gateway is not running"
	}
	held := now.Sub(dt.Time)
	if held < finalizerLostAfter {
		return nil, fmt.Sprintf("AI Gateway's finalizer stays, %s after the deletion", held.Round(time.Second))
	}
	line := finalizerLostLine(aigwLog, gvr, remote.GetNamespace(), remote.GetName())
	if line == "" {
		return nil, fmt.Sprintf("AI Gateway's finalizer stays %s after the deletion, and AI Gateway's log has no conflict on removing it: not %s",
			held.Round(time.Second), upstreamFinalizerIssue)
	}
	return &lostFinalizer{gvr: gvr, namespace: remote.GetNamespace(), name: remote.GetName(), index: i, deleting: dt.Time, logLine: line}, ""
}

// finalizerLostLine returns the line of AI Gateway's log that says it
// could not remove its finalizer from the object because of a conflict,
// or "". AI Gateway logs with controller-runtime's development zap
// logger (cmd/controller/main.go): tab-separated time, level, logger
// name, message and the fields as JSON. The error of a conflict names the
// resource and object (k8s.io/apimachinery pkg/api/errors, NewConflict);
// any other failure to remove the finalizer is not the upstream bug.
func finalizerLostLine(log string, gvr schema.GroupVersionResource, ns, name string) string {
	conflict := fmt.Sprintf("Operation cannot be fulfilled on %s %q", gvr.GroupResource().String(), name)
	var found string
	for line := range strings.Lines(log) {
		line = strings.TrimRight(line, "\n")
		fields := strings.Split(line, "\t")
		i := slices.Index(fields, aiGatewayFinalizerLost)
		if i < 0 || i+1 >= len(fields) {
			continue
		}
		var kv map[string]any
		if json.Unmarshal([]byte(fields[i+1]), &kv) != nil {
			continue
		}
		if kv["namespace"] != ns || kv["name"] != name {
			continue
		}
		if e, _ := kv["error"].(string); strings.Contains(e, conflict) {
			found = line // the last one
		}
	}
	return found
}

// operatorPatch is the JSON patch docs/limits.md gives operators: it removes
// only AI Gateway's finalizer, and only if it is still at that index.
func operatorPatch(index int) []byte {
	return fmt.Appendf(nil, `[{"op":"test","path":"/metadata/finalizers/%d","value":%q},{"op":"remove","path":"/metadata/finalizers/%d"}]`,
		index, aiGatewayFinalizer, index)
}

// remoteOf returns the kind, namespace and name of the object an Object
// manages on the gateway cluster, from its manifest; the namespace
// defaults to def.
func remoteOf(o *unstructured.Unstructured, def string) (kind, ns, name string) {
	m, _, _ := unstructured.NestedMap(o.Object, "spec", "forProvider", "manifest")
	kind, _, _ = unstructured.NestedString(m, "kind")
	ns, _, _ = unstructured.NestedString(m, "metadata", "namespace")
	name, _, _ = unstructured.NestedString(m, "metadata", "name")
	if ns == "" {
		ns = def
	}
	return kind, ns, name
}

// releaseLostFinalizers looks, for each Object left, at its object on the
// gateway cluster (the same API server). Each one AI Gateway's lost
// finalizer removal holds (classifyLost) is logged as upstream, with the
// evidence, and gets the operator's workaround of docs/limits.md: a JSON patch
// that removes only AI Gateway's finalizer. It returns what it saw of each
// remote object, by Object name, for the failure message, and counts the
// workarounds in sc.lostFinalizers.
func (sc *scenarios) releaseLostFinalizers(ctx context.Context, t *testing.T, left []unstructured.Unstructured) map[string]string {
	t.Helper()
	seen := map[string]string{}
	up := sc.s.Up
	for i := range left {
		kind, ns, name := remoteOf(&left[i], sc.w.TeamNS)
		gvr, ok := aiGatewayFinalized[kind]
		if !ok {
			seen[left[i].GetName()] = fmt.Sprintf("its %s %s/%s is not a kind AI Gateway finalizes", kind, ns, name)
			continue
		}
		remote, err := sc.get(ctx, gvr, ns, name)
		if err != nil {
			seen[left[i].GetName()] = fmt.Sprintf("its %s %s/%s: %v", kind, ns, name, err)
			continue
		}
		// The log is read only once AI Gateway's finalizer has stayed past
		// the bound, so the polls of a deletion that goes at once never
		// read it.
		var log string
		if dt := remote.GetDeletionTimestamp(); dt != nil && time.Since(dt.Time) >= finalizerLostAfter &&
			slices.Contains(remote.GetFinalizers(), aiGatewayFinalizer) {
			b, err := os.ReadFile(up.AIGW.Log)
			if err != nil {
				seen[left[i].GetName()] = fmt.Sprintf("cannot read AI Gateway's log %s: %v", up.AIGW.Log, err)
				continue
			}
			log = string(b)
		}
		lost, why := classifyLost(remote, gvr, log, up.AIGW.Running(), time.Now())
		if lost == nil {
			seen[left[i].GetName()] = fmt.Sprintf("its %s %s/%s (finalizers %v): %s", kind, ns, name, remote.GetFinalizers(), why)
			continue
		}
		t.Logf("UPSTREAM %s: %s %s/%s has been deleting since %s and still carries %s at index %d; AI Gateway logged (%s):\n  %s\n"+
			"  applying the operator's workaround of docs/limits.md: a JSON patch removing only that finalizer",
			upstreamFinalizerIssue, kind, ns, name, lost.deleting.UTC().Format(time.RFC3339), aiGatewayFinalizer, lost.index, up.AIGW.Log, lost.logLine)
		if _, err := sc.c.Dyn.Resource(gvr).Namespace(ns).Patch(ctx, name, types.JSONPatchType, operatorPatch(lost.index), metav1.PatchOptions{}); err != nil {
			// The finalizers changed under the patch; the next poll looks again.
			seen[left[i].GetName()] = fmt.Sprintf("its %s %s/%s: cannot remove AI Gateway's finalizer: %v", kind, ns, name, err)
			continue
		}
		sc.lostFinalizers++
		seen[left[i].GetName()] = fmt.Sprintf("its %s %s/%s: AI Gateway's lost finalizer removed by hand (%s)", kind, ns, name, upstreamFinalizerIssue)
	}
	return seen
}
