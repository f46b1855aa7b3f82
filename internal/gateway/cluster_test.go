package gateway

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWinner(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	winner := Claimant{Name: "prod", Created: t0, Serving: true}
	cases := map[string]struct {
		reason string
		cs     []Claimant
		want   string
	}{
		"Alone": {
			reason: "A gateway alone on its cluster wins it.",
			cs:     []Claimant{winner}, want: "prod",
		},
		"LoserCreated": {
			reason: "A second gateway created later, with no address, loses.",
			cs:     []Claimant{winner, {Name: "a-second", Created: t0.Add(time.Hour)}}, want: "prod",
		},
		"LoserDeleted": {
			reason: "When the loser is deleted, the list holds only the winner again.",
			cs:     []Claimant{winner}, want: "prod",
		},
		"LoserRecreated": {
			reason: "A recreated loser is newer than ever and still has no address.",
			cs:     []Claimant{{Name: "a-second", Created: t0.Add(2 * time.Hour)}, winner}, want: "prod",
		},
		"OlderLoserWithoutAddress": {
			reason: "An older gateway whose claim lost (it never got an address) does not take over the serving one.",
			cs:     []Claimant{{Name: "a-old", Created: t0.Add(-time.Hour)}, winner}, want: "prod",
		},
		"BothServing": {
			reason: "Both have an address (one moved to this cluster): the oldest wins.",
			cs:     []Claimant{{Name: "z-old", Created: t0.Add(-time.Hour), Serving: true}, winner}, want: "z-old",
		},
		"NeitherServing": {
			reason: "Neither has an address yet: the oldest wins.",
			cs:     []Claimant{{Name: "b", Created: t0.Add(time.Minute)}, {Name: "c", Created: t0}}, want: "c",
		},
		"SameTimestamp": {
			reason: "Created in the same second, neither serving: the first by name wins, whatever the order.",
			cs:     []Claimant{{Name: "b", Created: t0}, {Name: "a", Created: t0}}, want: "a",
		},
		"SameTimestampBothServing": {
			reason: "Same second, both serving: the first by name.",
			cs:     []Claimant{{Name: "b", Created: t0, Serving: true}, {Name: "a", Created: t0, Serving: true}}, want: "a",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := Winner(tc.cs)
			if !ok {
				t.Fatalf("%s\nWinner(...) found none", tc.reason)
			}
			if diff := cmp.Diff(tc.want, got.Name); diff != "" {
				t.Errorf("%s\nWinner(...): -want, +got:\n%s", tc.reason, diff)
			}
			// The order of the list never matters.
			rev := make([]Claimant, len(tc.cs))
			for i, c := range tc.cs {
				rev[len(tc.cs)-1-i] = c
			}
			if got2, _ := Winner(rev); got2.Name != got.Name {
				t.Errorf("%s\nWinner depends on the order: %q and %q", tc.reason, got.Name, got2.Name)
			}
		})
	}
	if _, ok := Winner(nil); ok {
		t.Errorf("Winner(nil) found a winner")
	}
}

func TestClaimantOf(t *testing.T) {
	xr := func(addr, reason string) map[string]any {
		st := map[string]any{"address": addr}
		if reason != "" {
			st["conditions"] = []any{map[string]any{"type": ConditionType, "status": "False", "reason": reason, "lastTransitionTime": "2026-12-01T00:00:00Z"}}
		}
		return map[string]any{
			"metadata": map[string]any{"name": "g", "creationTimestamp": "2026-12-01T04:00:00Z"},
			"spec":     map[string]any{"providerConfigName": "c1"}, "status": st,
		}
	}
	cases := map[string]struct {
		xr   map[string]any
		want bool
	}{
		"Address":             {xr: xr("192.0.2.1", ""), want: true},
		"NoAddress":           {xr: xr("", ""), want: false},
		"StaleAddressOfLoser": {xr: xr("192.0.2.1", ReasonClusterAlreadyHasGateway), want: false},
		"AddressNotReady":     {xr: xr("192.0.2.1", ReasonOldReplicasPresent), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, pc := claimantOf(tc.xr)
			if c.Serving != tc.want || pc != "c1" || c.Name != "g" || c.Created.IsZero() {
				t.Errorf("claimantOf(...) = %+v, %q; want Serving %t on c1", c, pc, tc.want)
			}
		})
	}
}
