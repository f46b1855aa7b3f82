package route

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
)

func be(name string, priority, weight int32) v1alpha1.Backend {
	return v1alpha1.Backend{Name: name, Priority: new(priority), Weight: new(weight)}
}

func TestTiers(t *testing.T) {
	type out struct {
		Refs  []string
		Tiers []v1alpha1.TierStatus
	}
	cases := map[string]struct {
		reason string
		in     []v1alpha1.Backend
		want   out
	}{
		"Empty": {reason: "No usable backend, no tier.", want: out{}},
		"Dense": {
			reason: "Priorities 9, 5, 0 become 2, 1, 0; spec order is kept within a tier.",
			in:     []v1alpha1.Backend{be("x", 9, 1), be("y", 5, 1), be("z", 0, 1), be("w", 5, 1)},
			want: out{
				Refs:  []string{"z:0:1", "y:1:1", "w:1:1", "x:2:1"},
				Tiers: []v1alpha1.TierStatus{{Tier: 0, Priority: 0, Backends: 1}, {Tier: 1, Priority: 5, Backends: 2}, {Tier: 2, Priority: 9, Backends: 1}},
			},
		},
		"GCDPerTier": {
			reason: "Each tier is divided by its own GCD.",
			in:     []v1alpha1.Backend{be("a", 0, 300), be("b", 0, 600), be("c", 1, 400), be("d", 1, 1000)},
			want: out{
				Refs:  []string{"a:0:1", "b:0:2", "c:1:2", "d:1:5"},
				Tiers: []v1alpha1.TierStatus{{Tier: 0, Priority: 0, Backends: 2}, {Tier: 1, Priority: 1, Backends: 2}},
			},
		},
		"MillionNextToOne": {
			reason: "Coprime weights stay as they are.",
			in:     []v1alpha1.Backend{be("a", 3, 1_000_000), be("b", 3, 1)},
			want:   out{Refs: []string{"a:0:1000000", "b:0:1"}, Tiers: []v1alpha1.TierStatus{{Tier: 0, Priority: 3, Backends: 2}}},
		},
		"Defaults": {
			reason: "Unset priority and weight are 0 and 1.",
			in:     []v1alpha1.Backend{{Name: "a"}},
			want:   out{Refs: []string{"a:0:1"}, Tiers: []v1alpha1.TierStatus{{Tier: 0, Priority: 0, Backends: 1}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			refs, tiers := tiers(tc.in)
			got := out{Tiers: tiers}
			for _, r := range refs {
				got.Refs = append(got.Refs, fmt.Sprintf("%s:%d:%d", r.backend.Name, r.tier, r.weight))
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\ntiers(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestTiersManyInOneTier(t *testing.T) {
	var in []v1alpha1.Backend
	for i := range 128 {
		in = append(in, be(fmt.Sprintf("b%d", i), 0, int32(6*(i+1))))
	}
	refs, tiers := tiers(in)
	if len(tiers) != 1 || tiers[0].Backends != 128 {
		t.Fatalf("want one tier of 128, got %v", tiers)
	}
	for i, r := range refs {
		if r.weight != int32(i+1) {
			t.Errorf("backend %d: weight %d, want %d (6(i+1) over the GCD 6)", i, r.weight, i+1)
		}
	}
}
