package fn

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// randomRoute builds a random but valid ModelRoute case: a spec, what was
// observed (composed under an earlier spec), and which inputs resolved.
type randomRoute struct {
	xr       obj
	observed map[string]obj
	required map[string][]obj
	// implied is what the current spec implies, computed independently of
	// the function.
	implied map[string]bool
	model   string
	keyed   map[string]bool
}

func genRoute(r *rand.Rand) randomRoute {
	rc := randomRoute{observed: map[string]obj{}, implied: map[string]bool{"namespace": true, "route": true, "httproute": true, "gateway-status": true}}
	pool := []string{"a", "b", "c", "d", "e", "f"}
	var backends []obj
	keyed := map[string]bool{}
	for _, n := range pool {
		if r.IntN(2) == 0 {
			continue
		}
		key := ""
		if r.IntN(2) == 0 {
			key = "key-" + n
			keyed[n] = true
		}
		backends = append(backends, backend(n, r.IntN(64), 1+r.IntN(1_000_000), key))
	}
	if len(backends) == 0 {
		backends = append(backends, backend("a", 0, 1, ""))
	}
	for _, b := range backends {
		n := b["name"].(string)
		rc.implied["backend-"+n], rc.implied["aibackend-"+n] = true, true
		if keyed[n] {
			rc.implied["credential-"+n], rc.implied["credpolicy-"+n] = true, true
			// A keyed backend's Secret is a source the route follows.
			rc.implied["sources"] = true
		}
	}
	rc.keyed = keyed
	rc.xr = routeXR(backends...)
	rc.model = "ml-team/qwen"

	// Observed: composed under an earlier spec that may have had any
	// backend of the pool, so some observed names are no longer implied.
	if r.IntN(4) > 0 {
		rc.observed["namespace"] = object("namespace", plainManifest("Namespace"), true, true)
		rc.observed["route"] = object("route", acceptedManifest("AIGatewayRoute", "qwen", r.IntN(2) == 0), true, true)
		rc.observed["httproute"] = object("httproute", httpRouteManifest(r.IntN(2) == 0, r.IntN(2) == 0), true, true)
		if r.IntN(2) == 0 {
			// Composed while the spec had a keyed backend, which it may
			// have no more.
			rc.observed["sources"] = object("sources", plainManifest("ConfigMap"), true, true)
		}
	}
	for _, n := range pool {
		if r.IntN(2) == 0 {
			for _, p := range []string{"backend-", "aibackend-", "credential-", "credpolicy-"} {
				rc.observed[p+n] = object(p+n, plainManifest("X"), true, r.IntN(2) == 0)
			}
			if r.IntN(2) == 0 {
				withReferences(rc.observed["credential-"+n])
			}
		}
	}

	// Required: unresolved, missing, not ready or ready; each Secret
	// unresolved, missing, without the key, or present.
	switch r.IntN(4) {
	case 0:
		rc.required = nil
	case 1:
		rc.required = map[string][]obj{"gateway": nil}
	case 2:
		rc.required = map[string][]obj{"gateway": gwRolling}
	default:
		rc.required = map[string][]obj{"gateway": {inferenceGateway(true, "Serving", r.IntN(2) == 0)}}
	}
	if rc.required != nil {
		for n := range keyed {
			switch r.IntN(4) {
			case 0:
			case 1:
				rc.required["secret-key-"+n] = nil
			case 2:
				rc.required["secret-key-"+n] = []obj{secret("key-"+n, obj{"other": apiKeyValue})}
			default:
				rc.required["secret-key-"+n] = []obj{secret("key-"+n, obj{"api-key": apiKeyValue})}
			}
		}
	}
	return rc
}

// TestModelRouteProperties checks, over many random cases, that:
//   - every observed composed resource the spec still implies stays desired
//     (only a spec change removes anything);
//   - the composed routes list exactly the model in /v1/models;
//   - every backendRef has weight >= 1 and a priority below the number of
//     tiers, and tiers are dense from 0.
func TestModelRouteProperties(t *testing.T) {
	const seeds = 2000
	r := rand.New(rand.NewPCG(1, 2))
	for i := range seeds {
		rc := genRoute(r)
		req := newRequest(t, rc.xr, rc.observed, rc.required)
		rsp := run(t, req)
		name := fmt.Sprintf("case %d", i)
		for _, res := range rsp.GetResults() {
			if res.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
				t.Fatalf("%s: unexpected Fatal: %s", name, res.GetMessage())
			}
		}
		desired := rsp.GetDesired().GetResources()
		for n := range rc.observed {
			if rc.implied[n] && desired[n] == nil {
				t.Fatalf("%s: observed %q is still implied by the spec but no longer desired: Crossplane would delete it", name, n)
			}
			if !rc.implied[n] && desired[n] != nil {
				t.Errorf("%s: %q is no longer in the spec but is still desired", name, n)
			}
		}
		for n := range desired {
			if !rc.implied[n] {
				t.Errorf("%s: desired %q is not implied by the spec", name, n)
			}
		}
		if m := manifest(rsp, "route"); m != nil && m["kind"] == "AIGatewayRoute" {
			if got := listedModels(m); len(got) != 1 || got[0] != rc.model {
				t.Errorf("%s: /v1/models lists %v, want exactly [%s]", name, got, rc.model)
			}
			tiers := map[int]bool{}
			highest := -1
			for _, ref := range backendRefsRaw(m) {
				if ref.weight < 1 || ref.weight > 1_000_000 {
					t.Errorf("%s: backendRef %s has weight %d", name, ref.name, ref.weight)
				}
				tiers[ref.priority] = true
				if ref.priority > highest {
					highest = ref.priority
				}
			}
			if highest+1 != len(tiers) {
				t.Errorf("%s: priorities %v are not dense from 0", name, tiers)
			}
			// A keyed backend joins the route only once its key has
			// reached the gateway cluster (the generator's observed route
			// never lists backends, so none is there already).
			for _, ref := range backendRefsRaw(m) {
				n := strings.TrimPrefix(ref.name, "qwen-")
				if !rc.keyed[n] {
					continue
				}
				o := rc.observed["credential-"+n]
				if o == nil || o["spec"].(obj)["references"] == nil {
					t.Errorf("%s: keyed backend %s is routed before its key was copied to the gateway cluster", name, n)
				}
			}
		}
	}
}

type rawRef struct {
	name             string
	priority, weight int
}

func backendRefsRaw(route obj) []rawRef {
	var out []rawRef
	rules, _ := route["spec"].(obj)["rules"].([]any)
	for _, rule := range rules {
		refs, _ := rule.(obj)["backendRefs"].([]any)
		for _, r := range refs {
			m := r.(obj)
			p, _ := m["priority"].(float64)
			w, _ := m["weight"].(float64)
			out = append(out, rawRef{name: m["name"].(string), priority: int(p), weight: int(w)})
		}
	}
	return out
}
