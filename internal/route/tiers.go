package route

import (
	"sort"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
)

// ref is one usable backend's place in the route.
type ref struct {
	backend v1alpha1.Backend
	// legacy, if not empty, is the name the route names the backend's
	// AIServiceBackend by: its name before it was renamed, while its
	// objects are on their way to the new one (names.go).
	legacy string
	// tier is the dense priority Envoy sees.
	tier uint32
	// weight is normalised within the tier.
	weight int32
}

// tiers orders usable backends into priority tiers and normalises weights.
//
// Envoy walks priorities 0, 1, 2, … and needs a priority 0, so the
// priorities of the tiers that have a usable backend are renumbered densely
// from 0, keeping their order. Weights compete only within a priority (each
// backendRef is its own locality, weighted within its priority: envoyproxy/
// gateway v1.8.3 internal/xds/translator/cluster.go), so each tier is
// normalised on its own: divided by the GCD of its weights. That keeps
// every ratio exactly, never makes a weight 0, and keeps every weight
// within 1..1,000,000 because the inputs are. Backends keep their spec order
// within a tier, so the same spec always gives the same bytes.
func tiers(usable []v1alpha1.Backend) ([]ref, []v1alpha1.TierStatus) {
	sorted := make([]v1alpha1.Backend, len(usable))
	copy(sorted, usable)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].PriorityOrDefault() < sorted[j].PriorityOrDefault() })

	refs := make([]ref, 0, len(sorted))
	var status []v1alpha1.TierStatus
	for start := 0; start < len(sorted); {
		end := start
		g := int32(0)
		for end < len(sorted) && sorted[end].PriorityOrDefault() == sorted[start].PriorityOrDefault() {
			g = gcd(g, sorted[end].WeightOrDefault())
			end++
		}
		t := len(status)
		tier := uint32(t) //nolint:gosec // at most v1alpha1.MaxBackends tiers
		for _, b := range sorted[start:end] {
			refs = append(refs, ref{backend: b, tier: tier, weight: b.WeightOrDefault() / g})
		}
		status = append(status, v1alpha1.TierStatus{Tier: t, Priority: sorted[start].PriorityOrDefault(), Backends: end - start})
		start = end
	}
	return refs, status
}

func gcd(a, b int32) int32 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// tiers are the usable backends' refs and tiers, each ref naming its
// backend's objects by the name the route keeps for them while they move
// (viaLegacy).
func (bs backends) tiers() ([]ref, []v1alpha1.TierStatus) {
	refs, ts := tiers(bs.usable)
	for i := range refs {
		refs[i].legacy = bs.viaLegacy[refs[i].backend.Name]
	}
	return refs, ts
}
