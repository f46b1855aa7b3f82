package controlplane

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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

func TestParseFunctionCalls(t *testing.T) {
	line := func(ts, kind, name string) string {
		return ts + "\tDEBUG\tfn/fn.go:88\tComposed\t{\"tag\": \"83c2\", \"xr-kind\": \"" + kind + "\", \"xr-name\": \"" + name + "\", \"resources\": 13}"
	}
	from := time.Date(2026, 12, 3, 15, 37, 0, 0, time.UTC)
	to := from.Add(time.Minute)
	ts := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		must(t, err)
		return v
	}
	cases := map[string]struct {
		log     string
		want    map[string][]time.Time
		wantErr string
	}{
		"CallsInTheWindow": {
			log: strings.Join([]string{
				line("2026-12-03T15:36:59.000Z", "ModelRoute", "a"),
				line("2026-12-03T15:37:10.000Z", "ModelRoute", "a"),
				line("2026-12-03T15:37:10.006Z", "ModelRoute", "a"),
				line("2026-12-03T15:37:20.000Z", "InferenceGateway", "gw"),
				line("2026-12-03T15:37:30.000Z", "ModelRoute", "b"),
				line("2026-12-03T15:38:00.000Z", "ModelRoute", "a"),
			}, "\n"),
			want: map[string][]time.Time{
				"a": {ts("2026-12-03T15:37:10.000Z"), ts("2026-12-03T15:37:10.006Z")},
				"b": {ts("2026-12-03T15:37:30.000Z")},
			},
		},
		"NoCallInTheWindow": {
			log:  line("2026-12-03T15:30:00.000Z", "ModelRoute", "a"),
			want: map[string][]time.Time{},
		},
		"NoLineAtAll": {
			log:     line("2026-12-03T15:37:20.000Z", "InferenceGateway", "gw"),
			wantErr: "no \"Composed\" line for a ModelRoute in the whole log",
		},
		"MessageRenamed": {
			log:     strings.ReplaceAll(line("2026-12-03T15:37:10.000Z", "ModelRoute", "a"), "\tComposed\t", "\tComposed the desired state\t"),
			wantErr: "no \"Composed\" line",
		},
		"NameKeyRenamed": {
			log:     strings.ReplaceAll(line("2026-12-03T15:37:10.000Z", "ModelRoute", "a"), "xr-name", "composite"),
			wantErr: "no longer matches",
		},
		"TimeFormatChanged": {
			log:     strings.Replace(line("2026-12-03T15:37:10.000Z", "ModelRoute", "a"), "2026-12-03T15:37:10.000Z", "1764776230.0", 1),
			wantErr: "no longer matches",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseFunctionCalls(tc.log, "ModelRoute", from, to)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseFunctionCalls(...): error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			must(t, err)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parseFunctionCalls(...): -want, +got:\n%s", diff)
			}
		})
	}
}
