package controlplane

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// acceptance is how the real controller that owns a kind says it took an
// object: conditions on the object itself, or per Gateway in
// status.parents (routes) or status.ancestors (policies).
type acceptance struct {
	gvr   schema.GroupVersionResource
	where string   // "", "parents" or "ancestors"
	conds []string // condition types that must be True
}

// acceptances are the kinds the function composes on the gateway cluster
// that a controller judges, and the conditions each sets once it has taken
// the object (gateway v1.8.3 internal/gatewayapi/status; ai-gateway v1.0.0
// internal/controller, update*Status with aigv1b1.ConditionTypeAccepted).
var acceptances = []acceptance{
	{gvr: harness.GVRGateway, conds: []string{"Accepted", "Programmed"}},
	{gvr: harness.GVRHTTPRoute, where: "parents", conds: []string{"Accepted", "ResolvedRefs"}},
	{gvr: harness.GVRClientPolicy, where: "ancestors", conds: []string{"Accepted"}},
	{gvr: harness.GVRTrafficPolicy, where: "ancestors", conds: []string{"Accepted"}},
	{gvr: harness.GVREGSecurityPolicy, where: "ancestors", conds: []string{"Accepted"}},
	{gvr: harness.GVRAIRoute, conds: []string{"Accepted"}},
	{gvr: harness.GVRAIBackend, conds: []string{"Accepted"}},
	{gvr: harness.GVRSecPolicy, conds: []string{"Accepted"}},
}

// notAccepted lists every object the function composed on the gateway
// cluster (in the gateway, front-door and team namespaces) that its real
// controller has not taken, as "kind ns/name: what". The anchor's
// HTTPRoute is left out: no listener admits the gateway namespace, by
// design (routesAttached checks it is NotAllowedByListeners).
func (sc *scenarios) notAccepted(ctx context.Context) ([]string, int) {
	var out []string
	seen := 0
	anchor := names.AnchorRoute(harness.GatewayXRName)
	for _, a := range acceptances {
		for _, ns := range []string{harness.GatewayNS, names.FrontDoorNamespace(harness.GatewayNS), sc.w.TeamNS} {
			l, err := sc.c.Dyn.Resource(a.gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				out = append(out, fmt.Sprintf("%s in %s: %v", a.gvr.Resource, ns, err))
				continue
			}
			for i := range l.Items {
				u := &l.Items[i]
				if u.GetDeletionTimestamp() != nil || (a.gvr == harness.GVRHTTPRoute && ns == harness.GatewayNS && u.GetName() == anchor) {
					continue
				}
				seen++
				if why := accepted(u, a); why != "" {
					out = append(out, fmt.Sprintf("%s %s/%s: %s", a.gvr.Resource, ns, u.GetName(), why))
				}
			}
		}
	}
	sort.Strings(out)
	return out, seen
}

// accepted returns "" when u's controller has taken it, else what is
// missing.
func accepted(u *unstructured.Unstructured, a acceptance) string {
	var missing []string
	switch a.where {
	case "":
		for _, c := range a.conds {
			if st := harness.ConditionStatus(u, c); st != "True" {
				missing = append(missing, fmt.Sprintf("%s=%q (%s)", c, st, harness.ConditionReason(u, c)))
			}
		}
	default:
		entries, _, _ := unstructured.NestedSlice(u.Object, "status", a.where)
		found := false
		for _, x := range entries {
			e, _ := x.(map[string]any)
			if e["controllerName"] != harness.EGControllerName || a.where == "parents" && !inSpec(u, e) {
				continue
			}
			found = true
			for _, c := range a.conds {
				if got := parentCondition(e, c); !strings.HasPrefix(got, "True") {
					missing = append(missing, c+"="+got)
				}
			}
		}
		if !found {
			missing = append(missing, "no status."+a.where+" entry from Envoy Gateway")
		}
	}
	return strings.Join(missing, ", ")
}

// allAccepted waits until every object the function composed on the
// gateway cluster is taken by its real controller, and logs how many.
func (sc *scenarios) allAccepted(t *testing.T, when string) {
	t.Helper()
	n := 0
	sc.eventually(t, waitSettle, "every composed object accepted by its controller "+when, func(ctx context.Context) string {
		bad, seen := sc.notAccepted(ctx)
		n = seen
		return strings.Join(bad, "; ")
	})
	t.Logf("%s: all %d composed objects that a controller judges are accepted by it (Envoy Gateway, AI Gateway)", when, n)
}

// inSpec reports whether a route's status.parents entry is for a parentRef
// its spec still has. Envoy Gateway v1.8.3 keeps the entries of parentRefs
// a route no longer names beside the new ones (internal/provider/
// kubernetes/status.go, mergeRouteParentStatus): after TLS is turned off, the health
// route's entry for the https listener stays with NoMatchingParent. Such an
// entry says nothing of how the route is served.
func inSpec(u *unstructured.Unstructured, entry map[string]any) bool {
	ref, _ := entry["parentRef"].(map[string]any)
	key := func(r map[string]any) string {
		ns, _ := r["namespace"].(string)
		if ns == "" {
			ns = u.GetNamespace()
		}
		return fmt.Sprintf("%s/%v/%v", ns, r["name"], r["sectionName"])
	}
	refs, _, _ := unstructured.NestedSlice(u.Object, "spec", "parentRefs")
	for _, x := range refs {
		if r, _ := x.(map[string]any); r != nil && key(r) == key(ref) {
			return true
		}
	}
	return false
}
