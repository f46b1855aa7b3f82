package controlplane

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

func TestScaleSize(t *testing.T) {
	cases := map[string]struct {
		v       string
		set     bool
		want    int
		wantErr string // substring; "" for none
	}{
		"Unset":        {},
		"Hundred":      {v: "100", set: true, want: 100},
		"Ten":          {v: "10", set: true, want: 10},
		"SetButEmpty":  {v: "", set: true, wantErr: `cannot read CONTROLPLANE_SCALE=""`},
		"OneRoute":     {v: "1", set: true, want: 1},
		"Zero":         {v: "0", set: true, wantErr: "1 or more"},
		"Negative":     {v: "-5", set: true, wantErr: "1 or more"},
		"NotANumber":   {v: "lots", set: true, wantErr: "whole number"},
		"WithASpace":   {v: "100 ", set: true, wantErr: "whole number"},
		"IgnoredUnset": {v: "100", set: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := scaleSize(tc.v, tc.set)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("scaleSize(%q, %t): error %v, want one containing %q", tc.v, tc.set, err, tc.wantErr)
				}
				return
			}
			harness.Must(t, err)
			if got != tc.want {
				t.Errorf("scaleSize(%q, %t) = %d, want %d", tc.v, tc.set, got, tc.want)
			}
		})
	}
}

// TestLastingRestWindow checks how the scale test reads the length of its
// lasting-rest window: unset measures none, a bad value is refused.
func TestLastingRestWindow(t *testing.T) {
	cases := map[string]struct {
		v       string
		set     bool
		want    time.Duration
		wantErr bool
	}{
		"Unset":        {},
		"ThreeMinutes": {v: "3m", set: true, want: 3 * time.Minute},
		"NoUnit":       {v: "3", set: true, wantErr: true},
		"Zero":         {v: "0s", set: true, wantErr: true},
		"Empty":        {v: "", set: true, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := lastingRestWindow(tc.v, tc.set)
			if (err != nil) != tc.wantErr {
				t.Fatalf("lastingRestWindow(%q, %t): error %v, want error %t", tc.v, tc.set, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("lastingRestWindow(%q, %t) = %s, want %s", tc.v, tc.set, got, tc.want)
			}
		})
	}
}

func TestWaitRoutes(t *testing.T) {
	cases := map[string]struct {
		n    int
		want time.Duration
	}{
		"ScenarioSeven": {n: 10, want: waitScale},
		"Hundred":       {n: 100, want: waitScale},
		"TwoHundred":    {n: 200, want: 2 * waitScale},
		"OneFifty":      {n: 150, want: waitScale * 3 / 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := waitRoutes(tc.n); got != tc.want {
				t.Errorf("waitRoutes(%d) = %s, want %s", tc.n, got, tc.want)
			}
		})
	}
}

func TestCreationCounts(t *testing.T) {
	base := time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return base.Add(time.Duration(s * float64(time.Second))) }
	cases := map[string]struct {
		calls          map[string][]time.Time
		created, ready map[string]time.Time
		wantReconciles map[string]int
		wantCalls      map[string]int
	}{
		"PairsAreOneReconcile": {
			// Three reconciles of two calls each, milliseconds apart.
			calls:          map[string][]time.Time{"a": {at(1), at(1.005), at(3), at(3.004), at(10), at(10.006)}},
			created:        map[string]time.Time{"a": at(0)},
			ready:          map[string]time.Time{"a": at(11)},
			wantReconciles: map[string]int{"a": 3},
			wantCalls:      map[string]int{"a": 6},
		},
		"OnlyFromCreationUntilReady": {
			// A call of an earlier route of that name, and the TTL's
			// reconciles once ready, are not the creation's.
			calls:          map[string][]time.Time{"a": {at(-5), at(2), at(2.003), at(20), at(80)}},
			created:        map[string]time.Time{"a": at(0)},
			ready:          map[string]time.Time{"a": at(20)},
			wantReconciles: map[string]int{"a": 2},
			wantCalls:      map[string]int{"a": 3},
		},
		"EachRouteItsOwnWindow": {
			calls: map[string][]time.Time{
				"a": {at(1), at(5), at(9)},
				"b": {at(4.5), at(6), at(8), at(9.5)},
			},
			created:        map[string]time.Time{"a": at(0), "b": at(4)},
			ready:          map[string]time.Time{"a": at(6), "b": at(10)},
			wantReconciles: map[string]int{"a": 2, "b": 4},
			wantCalls:      map[string]int{"a": 2, "b": 4},
		},
		"ReadyWithoutACallInTheLog": {
			created:        map[string]time.Time{"a": at(0)},
			ready:          map[string]time.Time{"a": at(3)},
			wantReconciles: map[string]int{"a": 0},
			wantCalls:      map[string]int{"a": 0},
		},
		"NeverReadyHasNoCount": {
			calls:          map[string][]time.Time{"a": {at(1)}, "b": {at(1)}},
			created:        map[string]time.Time{"a": at(0), "b": at(0)},
			ready:          map[string]time.Time{"a": at(2)},
			wantReconciles: map[string]int{"a": 1},
			wantCalls:      map[string]int{"a": 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			gotReconciles, gotCalls := creationCounts(tc.calls, tc.created, tc.ready)
			if diff := cmp.Diff(tc.wantReconciles, gotReconciles); diff != "" {
				t.Errorf("creationCounts(...) reconciles: -want, +got:\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCalls, gotCalls); diff != "" {
				t.Errorf("creationCounts(...) calls: -want, +got:\n%s", diff)
			}
		})
	}
}

func TestSpread(t *testing.T) {
	cases := map[string]struct {
		vs     []int
		want   distribution
		wantOK bool
	}{
		"None": {},
		"One":  {vs: []int{7}, want: distribution{median: 7, p90: 7, max: 7}, wantOK: true},
		"Unsorted": {
			vs:     []int{9, 1, 5},
			want:   distribution{median: 5, p90: 9, max: 9},
			wantOK: true,
		},
		"TenRoutes": {
			// The 90th percentile of ten is the ninth: one outlier is
			// the max, not the p90.
			vs:     []int{3, 1, 2, 4, 5, 6, 7, 8, 9, 40},
			want:   distribution{median: 6, p90: 9, max: 40},
			wantOK: true,
		},
		"EvenCountUpperMedian": {
			vs:     []int{1, 2, 3, 4},
			want:   distribution{median: 3, p90: 4, max: 4},
			wantOK: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := spread(tc.vs)
			if ok != tc.wantOK {
				t.Fatalf("spread(%v): ok %t, want %t", tc.vs, ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(distribution{})); diff != "" {
				t.Errorf("spread(%v): -want, +got:\n%s", tc.vs, diff)
			}
		})
	}
}
