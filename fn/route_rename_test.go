package fn

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
)

// legacyObject is an Object the function composed before it renamed
// dashed backends: under the key prefix+backend, for the remote name
// <route>-<backend>, live and Ready on the gateway cluster.
func legacyObject(t *testing.T, key, kind, remote string) obj {
	t.Helper()
	o := object(key, obj{"apiVersion": "v1", "kind": kind, "metadata": obj{"name": remote, "namespace": teamNS}}, true, true)
	o["spec"].(obj)["forProvider"] = obj{"manifest": obj{"apiVersion": "v1", "kind": kind, "metadata": obj{"name": remote, "namespace": teamNS}}}
	return providerSyncs(t, o)
}

// namedRoute is the model's AIGatewayRoute Object, applied and live,
// naming refs, and accepted.
func namedRoute(t *testing.T, refs ...string) obj {
	t.Helper()
	o := routedObject(true, refs...)
	live := mustStruct(t, o["spec"].(obj)["forProvider"].(obj)["manifest"].(obj)).AsMap()
	live["status"] = acceptedManifest("AIGatewayRoute", "qwen", true)["status"]
	o["status"].(obj)["atProvider"] = obj{"manifest": live}
	return o
}

// generatedHTTPRoute is the observed HTTPRoute AI Gateway generated, naming
// refs (the Backends of the AIServiceBackends the route names), accepted.
func generatedHTTPRoute(refs ...string) obj {
	m := httpRouteManifest(true, true)
	brs := make([]any, len(refs))
	for i, r := range refs {
		brs[i] = obj{"name": r}
	}
	m["spec"] = obj{"rules": []any{obj{"backendRefs": brs}}}
	return object("httproute", m, true, true)
}

// TestRenamedBackendMoves follows a serving ModelRoute whose backend vllm-a
// the function composed as qwen-vllm-a, under the keys the function used
// before, through the reconciles after the upgrade that renamed it
// (internal/names/backend.go): provider-kubernetes creates each new Object
// one reconcile after Crossplane applies it, and AI Gateway regenerates
// the HTTPRoute one reconcile after the route changes. At every reconcile:
// every name the desired route names is an AIServiceBackend on the gateway
// cluster, and no Object whose object the observed route or HTTPRoute still
// names stops being desired. In the end the route names the new name only,
// and the Objects under the old keys are gone.
func TestRenamedBackendMoves(t *testing.T) {
	const old, renamed = "qwen-vllm-a", "qwen-vllm.a"
	if got := names.BackendObject("qwen", "vllm-a"); got != renamed {
		t.Fatalf("BackendObject(qwen, vllm-a) = %q, want %q", got, renamed)
	}
	xr := routeXR(backend("vllm-a", 0, 1, ""), backend("b", 1, 1, ""))
	observed := map[string]obj{
		"namespace":        object("namespace", plainManifest("Namespace"), true, true),
		"gateway-status":   object("gateway-status", plainManifest("ConfigMap"), true, true),
		"route":            namedRoute(t, old, "qwen-b"),
		"httproute":        generatedHTTPRoute(old, "qwen-b"),
		"backend-vllm-a":   legacyObject(t, "backend-vllm-a", "Backend", old),
		"aibackend-vllm-a": legacyObject(t, "aibackend-vllm-a", "AIServiceBackend", old),
		"backend-b":        legacyObject(t, "backend-b", "Backend", "qwen-b"),
		"aibackend-b":      legacyObject(t, "aibackend-b", "AIServiceBackend", "qwen-b"),
	}
	required := map[string][]obj{"gateway": gwReady}
	// remote is the name an Object's manifest gives its remote object.
	remote := func(o obj) string {
		m, _ := o["spec"].(obj)["forProvider"].(obj)["manifest"].(obj)
		md, _ := m["metadata"].(obj)
		n, _ := md["name"].(string)
		return n
	}
	var httpRouteNext []string
	for step := range 8 {
		rsp := run(t, newRequest(t, xr, observed, required))
		desired := rsp.GetDesired().GetResources()

		// What the serving route names exists on the gateway cluster.
		live := map[string]bool{}
		for n, o := range observed {
			if strings.HasPrefix(n, "aibackend-") && o["status"].(obj)["atProvider"] != nil {
				live[remote(o)] = true
			}
		}
		refs := backendRefs(t, rsp)
		var named []string
		for _, r := range refs {
			n, _, _ := strings.Cut(r, ":")
			named = append(named, n)
			if !live[n] {
				t.Fatalf("reconcile %d: the route names %q, which is no AIServiceBackend on the gateway cluster (there are %v)", step, n, slices.Sorted(maps.Keys(live)))
			}
		}
		// Nothing the observed route or HTTPRoute names is deleted.
		inUse := map[string]bool{}
		for _, n := range append(refsOf(observed["route"]), refsOf(observed["httproute"])...) {
			inUse[n] = true
		}
		for n, o := range observed {
			if inUse[remote(o)] && desired[n] == nil {
				t.Fatalf("reconcile %d: %s (%s) is no longer desired, and the serving route still names it", step, n, remote(o))
			}
		}

		// Crossplane applies and deletes; provider-kubernetes creates a new
		// Object's remote object by the next reconcile; AI Gateway
		// regenerates the HTTPRoute from the route one reconcile late.
		next := map[string]obj{}
		for n := range desired {
			d := rsp.GetDesired().GetResources()[n]
			if prev, ok := observed[n]; ok {
				o := applyDesired(t, prev, rsp, n)
				if n == "route" {
					o = namedRoute(t, named...)
				} else if n != "httproute" {
					o = providerSyncs(t, o)
				}
				next[n] = o
				continue
			}
			o := object(n, nil, false, false)
			o["spec"] = d.GetResource().AsMap()["spec"]
			next[n] = o
		}
		if httpRouteNext != nil {
			next["httproute"] = generatedHTTPRoute(httpRouteNext...)
		}
		httpRouteNext = named
		observed = next
		t.Logf("reconcile %d: the route names %v; desired %v", step, named, slices.Sorted(maps.Keys(desired)))
	}
	rsp := run(t, newRequest(t, xr, observed, required))
	if diff := cmp.Diff([]string{renamed + ":0:1", "qwen-b:1:1"}, backendRefs(t, rsp)); diff != "" {
		t.Errorf("in the end the route names: -want, +got:\n%s", diff)
	}
	var keys []string
	for n := range rsp.GetDesired().GetResources() {
		keys = append(keys, n)
	}
	slices.Sort(keys)
	want := []string{"aibackend-b", "aibackend-vllm-a.v2", "backend-b", "backend-vllm-a.v2", "gateway-status", "httproute", "namespace", "route"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("in the end the desired Objects: -want, +got:\n%s", diff)
	}
	for _, n := range []string{"backend-vllm-a.v2", "aibackend-vllm-a.v2"} {
		if got := manifest(rsp, n)["metadata"].(obj)["name"]; got != renamed {
			t.Errorf("%s names %v, want %s", n, got, renamed)
		}
	}
}

// refsOf names the backendRefs of an observed route or HTTPRoute Object,
// applied and live.
func refsOf(o obj) []string {
	if o == nil {
		return nil
	}
	var out []string
	var ms []obj
	if m, ok := o["spec"].(obj)["forProvider"].(obj)["manifest"].(obj); ok {
		ms = append(ms, m)
	}
	if at, ok := o["status"].(obj)["atProvider"].(obj); ok {
		if m, ok := at["manifest"].(obj); ok {
			ms = append(ms, m)
		}
	}
	for _, m := range ms {
		spec, _ := m["spec"].(obj)
		rules, _ := spec["rules"].([]any)
		for _, r := range rules {
			brs, _ := r.(obj)["backendRefs"].([]any)
			for _, b := range brs {
				out = append(out, b.(obj)["name"].(string))
			}
		}
	}
	return out
}
