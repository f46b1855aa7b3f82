package controlplane

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// quickRoute names the keyed ModelRoute scenario 7 creates on the ready
// gateway, and its API-key Secret.
const (
	quickRoute  = "quick"
	quickSecret = "quick-key"
	// quickGoal is how soon a new keyed ModelRoute on a ready gateway must
	// be RoutingReady (issue 21, item 12).
	quickGoal = 5 * time.Second
)

// scale is scenario 7: a new keyed ModelRoute on the ready gateway
// (newKeyedRoute), then ten ModelRoutes of sixteen backends each. Once all
// route, a template change rolls Envoy, and every route must follow the
// gateway down and back up (followRollout).
func (sc *scenarios) scale(t *testing.T) {
	sc.newKeyedRoute(t)
	created, cpu := time.Now(), sc.c.Procs.CPU()
	var names []string
	for i := range scaleRoutes {
		name := fmt.Sprintf("scale-%02d", i)
		names = append(names, name)
		sc.c.Apply(sc.ctx, scaleRoute(name, i))
	}
	sc.allRouting(t, "scale", names, created)
	t.Logf("CPU from the routes' creation until all routed: %s", sc.c.Procs.CPU().Since(cpu))
	sc.sp.Record("scale", "backends-per-route", scaleBackends)
	sc.followRollout(t, "scale", names, created, harness.ExtProcImage+"-upgrade.2", false)
	sc.allAccepted(t, "scale")
	sc.w.Check(t)
}

// newKeyedRoute creates a ModelRoute with an in-cluster backend and a
// keyed one on the ready gateway, and times it to RoutingReady=True, with
// the steps of its key's copy on the way: the credential Object, its
// references, its delivery, the backend in the route. The key's copy is
// the long pole: provider-kubernetes must create the Secret before the
// references may enter the Object (remote.SecretCopy says why).
func (sc *scenarios) newKeyedRoute(t *testing.T) {
	c, w := sc.c, sc.w
	key := base64.StdEncoding.EncodeToString([]byte("sk-quick-" + fmt.Sprint(time.Now().UnixNano())))
	w.Forbid("the quick route's API key", key)
	c.Apply(sc.ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": quickSecret, "namespace": harness.TeamControlNS},
		"type":     "Opaque", "data": map[string]any{harness.APIKeyField: key},
	}})
	start := time.Now()
	c.Apply(sc.ctx, keyedRoute(quickRoute, "quick."+harness.TeamControlNS+".svc.cluster.local", quickSecret))
	steps := map[string]time.Duration{}
	mark := func(step string, done bool) {
		if _, ok := steps[step]; !ok && done {
			steps[step] = time.Since(start)
		}
	}
	// internal/route composes a backend's key copy as "credential-<backend>".
	credential := "credential-" + hostedBackend
	sc.eventually(t, waitRoute, "the new keyed ModelRoute RoutingReady=True", func(ctx context.Context) string {
		o := sc.composedObject(ctx, harness.TeamControlNS, quickRoute, credential)
		mark("credential Object created", o != nil)
		if o != nil {
			refs, _, _ := unstructured.NestedSlice(o.Object, "spec", "references")
			mark("credential references added", len(refs) > 0)
			mark("credential delivered", len(refs) > 0 && harness.ConditionStatus(o, "Synced") == "True" && o.GetGeneration() == harness.Int64At(o.Object, "status", "observedGeneration"))
		}
		if r := sc.composedObject(ctx, harness.TeamControlNS, quickRoute, "route"); r != nil {
			mark("route Object accepted", harness.ConditionStatus(r, "Ready") == "True")
			mark("keyed backend in the route", hasBackendRef(r, names.BackendObject(quickRoute, hostedBackend)))
		}
		r, err := sc.get(ctx, harness.GVRModelRoute, harness.TeamControlNS, quickRoute)
		if err != nil {
			return err.Error()
		}
		return wantCondition(r, "RoutingReady", "True")
	})
	took := time.Since(start)
	t.Logf("a new keyed ModelRoute on the ready gateway: RoutingReady=True %s after its creation; steps: %v", took.Round(time.Millisecond), steps)
	k := harness.TeamControlNS + "/" + quickRoute
	t.Logf("its breaker: %s", w.ReplayBreaker(k, start, time.Now()))
	sc.sp.Record("new-keyed-route", "routing-ready-after-creation", seconds(took))
	for s, d := range steps {
		sc.sp.Record("new-keyed-route", s, seconds(d))
	}
	if took > quickGoal {
		// The events are many (a hundred and more): only when they may
		// tell why the goal was missed.
		t.Logf("GOAL MISSED: the new keyed ModelRoute took %s, more than %s; the events that cost its breaker tokens:\n%s",
			took.Round(time.Millisecond), quickGoal, w.SpendsBetween(k, start, time.Now()))
	}
}

// hasBackendRef reports whether the manifest of an AIGatewayRoute Object
// names the backend in its spec.
func hasBackendRef(o *unstructured.Unstructured, backend string) bool {
	rules, _, _ := unstructured.NestedSlice(o.Object, "spec", "forProvider", "manifest", "spec", "rules")
	for _, r := range rules {
		refs, _, _ := unstructured.NestedSlice(r.(map[string]any), "backendRefs")
		for _, x := range refs {
			if n, _ := x.(map[string]any)["name"].(string); n == backend {
				return true
			}
		}
	}
	return false
}

// scaleRoute is a ModelRoute of scaleBackends in-cluster backends without
// API keys, in two priority tiers.
func scaleRoute(name string, i int) *unstructured.Unstructured {
	bs := make([]any, scaleBackends)
	for j := range scaleBackends {
		bs[j] = map[string]any{
			"name":     fmt.Sprintf("b%02d", j),
			"endpoint": map[string]any{"hostname": fmt.Sprintf("m%02d-b%02d.%s.svc.cluster.local", i, j, harness.TeamControlNS), "port": int64(8000), "tls": false},
			"schema":   map[string]any{"name": "OpenAI"},
			"priority": int64(j % 2),
		}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelRoute",
		"metadata": map[string]any{"name": name, "namespace": harness.TeamControlNS},
		"spec":     map[string]any{"gatewayName": harness.GatewayXRName, "backends": bs},
	}}
}
