package controlplane

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// soakRoute is one ModelRoute of the soak as the work last wrote it.
type soakRoute struct {
	name string
	// secret names the API-key Secret of its hosted backend; "" for a
	// route whose other tier is a second in-cluster backend.
	secret string
	// port is its in-cluster backend's port, which a change flips.
	port int64
	// weight is its in-cluster backend's weight in its tier, which a
	// change draws anew (1 to 4).
	weight int64
	// extra: a third backend, in-cluster, in the in-cluster backend's
	// tier, which a change adds or removes.
	extra bool
	// swapped: the in-cluster backend (and the extra one) in tier 1 and
	// the other in tier 0, which a change flips.
	swapped bool
}

// Backend names of a soak route: its in-cluster backend, the extra one,
// and its other tier's.
const (
	soakLocal = "local"
	soakExtra = "extra"
	soakSpare = "spare"
)

// localTier is the tier of the in-cluster backend (and the extra one).
func (r soakRoute) localTier() int64 {
	if r.swapped {
		return 1
	}
	return 0
}

// host is the in-cluster hostname of its backend b.
func (r soakRoute) host(b string) string {
	if b == soakLocal {
		return r.name + "." + harness.TeamControlNS + ".svc.cluster.local"
	}
	return r.name + "-" + b + "." + harness.TeamControlNS + ".svc.cluster.local"
}

// other is the name of its other tier's backend.
func (r soakRoute) other() string {
	if r.secret != "" {
		return hostedBackend
	}
	return soakSpare
}

// object is the ModelRoute: its in-cluster backend, with the extra one
// when it has it, in one tier, and in the other a hosted keyed backend or
// a second in-cluster one.
func (r soakRoute) object() *unstructured.Unstructured {
	u := plainRoute(r.name, r.host(soakLocal))
	spec := u.Object["spec"].(map[string]any)
	local := spec["backends"].([]any)[0].(map[string]any)
	local["endpoint"].(map[string]any)["port"] = r.port
	local["priority"] = r.localTier()
	local["weight"] = r.weight
	bs := []any{local}
	if r.extra {
		bs = append(bs, map[string]any{
			"name":     soakExtra,
			"endpoint": map[string]any{"hostname": r.host(soakExtra), "port": int64(8000), "tls": false},
			"schema":   map[string]any{"name": "OpenAI"},
			"priority": r.localTier(),
		})
	}
	other := map[string]any{
		"name":     soakSpare,
		"endpoint": map[string]any{"hostname": r.host(soakSpare), "port": int64(8000), "tls": false},
		"schema":   map[string]any{"name": "OpenAI"},
	}
	if r.secret != "" {
		other = hostedKeyedBackend(r.secret)
	}
	other["priority"] = 1 - r.localTier()
	spec["backends"] = append(bs, other)
	return u
}

// localities is what Envoy must be told of the route's backends, by
// their Backend's name on the gateway cluster: a locality each, in the
// backend's tier, of its weight, at its port (0: not checked, the hosted
// backend's). The function divides a tier's weights by their greatest
// common divisor (internal/route/tiers.go): the extra backend's weight is
// 1, so the in-cluster backend keeps its weight beside it, and a backend
// alone in its tier has weight 1.
func (r soakRoute) localities() map[string]locality {
	w := int64(1)
	if r.extra {
		w = r.weight
	}
	out := map[string]locality{
		names.BackendObject(r.name, soakLocal): {priority: r.localTier(), weight: w, port: r.port},
		names.BackendObject(r.name, r.other()): {priority: 1 - r.localTier(), weight: 1},
	}
	if r.secret == "" {
		out[names.BackendObject(r.name, soakSpare)] = locality{priority: 1 - r.localTier(), weight: 1, port: 8000}
	}
	if r.extra {
		out[names.BackendObject(r.name, soakExtra)] = locality{priority: r.localTier(), weight: 1, port: 8000}
	}
	return out
}

// priorities are the tiers of its localities.
func (r soakRoute) priorities() []int64 {
	var out []int64
	for _, l := range r.localities() {
		out = append(out, l.priority)
	}
	slices.Sort(out)
	return out
}

// remote names the objects the route composes on the gateway cluster, by
// resource: what its deletion may take.
func (r soakRoute) remote() map[string][]string {
	backends := []string{names.BackendObject(r.name, soakLocal), names.BackendObject(r.name, r.other())}
	if r.extra {
		backends = append(backends, names.BackendObject(r.name, soakExtra))
	}
	out := map[string][]string{
		"aigatewayroutes":   {r.name},
		"httproutes":        {r.name},
		"backends":          backends,
		"aiservicebackends": backends,
	}
	if r.secret != "" {
		out["backendsecuritypolicies"] = []string{names.BackendObject(r.name, hostedBackend)}
		out["secrets"] = []string{names.BackendObject(r.name, hostedBackend)}
	}
	return out
}
