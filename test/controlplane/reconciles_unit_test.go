package controlplane

import (
	"strings"
	"testing"
	"time"
)

func TestStuckReconcilesProblem(t *testing.T) {
	cases := map[string]struct {
		reconciles int
		want       string // substring; "" for none
	}{
		"NeverLookedAtAgain": {reconciles: 0, want: "at least 3"},
		"LookedAtOnce":       {reconciles: 1, want: "not looked at again"},
		"FewestAllowed":      {reconciles: 3},
		"EveryTTL":           {reconciles: 6},
		"MostAllowed":        {reconciles: 10},
		"Spins":              {reconciles: 11, want: "at most 10"},
		"SpinsEveryTwoSec":   {reconciles: 30, want: "spins"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := stuckReconcilesProblem(tc.reconciles, time.Minute)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("stuckReconcilesProblem(%d, 1m) = %q, want %q", tc.reconciles, got, tc.want)
			}
		})
	}
}
