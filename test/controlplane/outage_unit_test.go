package controlplane

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestFollowOutage(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tr := func(s float64, status string) transition { return transition{at: at(s), status: status} }
	// The gateway: True, False at +10 s for 70 s, True again at +80 s.
	gw := []transition{tr(0, "True"), tr(10, "False"), tr(80, "True")}
	gf, gr := at(10), at(80)
	bound := 90 * time.Second
	cases := map[string]struct {
		reason   string
		rt       []transition
		end      float64
		held     bool
		want     routeFollow
		problems []string // substrings, one per problem
	}{
		"Followed": {
			reason: "The route went False during the outage and True after it: every promise kept.",
			rt:     []transition{tr(1, "True"), tr(15, "False"), tr(82, "True")},
			end:    200, held: true,
			want: routeFollow{wentDown: true, down: 5 * time.Second, cameUp: true, up: 2 * time.Second},
		},
		"FalseAtTheStart": {
			reason: "A route already False when the gateway went down went down with it.",
			rt:     []transition{tr(1, "True"), tr(9, "False"), tr(81, "True")},
			end:    200, held: true,
			want: routeFollow{wentDown: true, cameUp: true, up: time.Second},
		},
		"StayedTrueThroughAHeldOutage": {
			reason: "Issue 32 item 6: a route that never hears of its gateway's held outage fails.",
			rt:     []transition{tr(1, "True")},
			end:    200, held: true,
			want:     routeFollow{},
			problems: []string{"stayed RoutingReady=True"},
		},
		"StayedTrueThroughAShortOutage": {
			reason: "For an outage the suite did not hold, a route may stay True.",
			rt:     []transition{tr(1, "True")},
			end:    200,
			want:   routeFollow{},
		},
		"NeverCameBack": {
			reason: "A route that followed the gateway down must come back.",
			rt:     []transition{tr(1, "True"), tr(15, "False")},
			end:    200, held: true,
			want:     routeFollow{wentDown: true, down: 5 * time.Second},
			problems: []string{"not RoutingReady=True again"},
		},
		"WentDownOnlyAfterTheRecovery": {
			reason: "A False only after the gateway is True again is stale, not a follow: counted, within the bound.",
			rt:     []transition{tr(1, "True"), tr(85, "False"), tr(95, "True")},
			end:    200, held: true,
			want:     routeFollow{stale: []staleFalse{{from: at(85), lasted: 10 * time.Second}}},
			problems: []string{"stayed RoutingReady=True"},
		},
		"StaleFalseWithinTheBound": {
			reason: "A short outage missed, then a stale False that ends in time: no problem, one stale spell.",
			rt:     []transition{tr(1, "True"), tr(85, "False"), tr(100, "True")},
			end:    200,
			want:   routeFollow{stale: []staleFalse{{from: at(85), lasted: 15 * time.Second}}},
		},
		"StaleFalseBeyondTheBound": {
			reason: "A stale False that lasts longer than the bound breaks the promise.",
			rt:     []transition{tr(1, "True"), tr(15, "False"), tr(81, "True"), tr(90, "False"), tr(190, "True")},
			end:    300, held: true,
			want: routeFollow{wentDown: true, down: 5 * time.Second, cameUp: true, up: time.Second,
				stale: []staleFalse{{from: at(90), lasted: 100 * time.Second}}},
			problems: []string{"stayed so for 1m40s (ended)"},
		},
		"StaleFalseStillOpen": {
			reason: "A stale False still open when the record ends is measured to the end.",
			rt:     []transition{tr(1, "True"), tr(15, "False"), tr(81, "True"), tr(90, "False")},
			end:    200, held: true,
			want: routeFollow{wentDown: true, down: 5 * time.Second, cameUp: true, up: time.Second,
				stale: []staleFalse{{from: at(90), lasted: 110 * time.Second, open: true}}},
			problems: []string{"(still open)"},
		},
		"NewReasonAfterTheRecoveryIsNoNewSpell": {
			reason: "A route False since the outage that changes its reason after the recovery has no stale spell.",
			rt:     []transition{tr(1, "True"), tr(15, "False"), {at: at(82), status: "False", reason: "Other"}, tr(84, "True")},
			end:    200, held: true,
			want: routeFollow{wentDown: true, down: 5 * time.Second, cameUp: true, up: 4 * time.Second},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := followOutage(gw, tc.rt, gf, gr, at(tc.end))
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(routeFollow{}, staleFalse{})); diff != "" {
				t.Errorf("%s\nfollowOutage(...): -want, +got:\n%s", tc.reason, diff)
			}
			ps := got.problems(tc.held, bound)
			if len(ps) != len(tc.problems) {
				t.Fatalf("%s\nproblems(...) = %q, want %d matching %q", tc.reason, ps, len(tc.problems), tc.problems)
			}
			for i, want := range tc.problems {
				if !strings.Contains(ps[i], want) {
					t.Errorf("%s\nproblems(...)[%d] = %q, want it to contain %q", tc.reason, i, ps[i], want)
				}
			}
		})
	}
}

func TestStaleEndsWhenTheGatewayFallsAgain(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	gw := []transition{{at: at(0), status: "True"}, {at: at(10), status: "False"}, {at: at(20), status: "True"}, {at: at(30), status: "False"}}
	rt := []transition{{at: at(0), status: "True"}, {at: at(25), status: "False"}}
	f := followOutage(gw, rt, at(10), at(20), at(100))
	want := []staleFalse{{from: at(25), lasted: 5 * time.Second}}
	if diff := cmp.Diff(want, f.stale, cmp.AllowUnexported(staleFalse{})); diff != "" {
		t.Errorf("a stale False ends when the gateway leaves True again, which makes the False true: -want, +got:\n%s", diff)
	}
	if f.openStale(time.Minute) {
		t.Errorf("openStale: true for a spell that ended")
	}
}

func TestTrueThroughout(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	cases := map[string]struct {
		ts   []transition
		want string // substring; "" for none
	}{
		"StayedTrue":          {ts: []transition{{at: at(0), status: "True"}}},
		"FalseAfterTheWindow": {ts: []transition{{at: at(0), status: "True"}, {at: at(70), status: "False"}}},
		"FalseInTheWindow": {
			ts:   []transition{{at: at(0), status: "True"}, {at: at(20), status: "False", reason: "WaitingForGateway"}, {at: at(21), status: "True"}},
			want: "RoutingReady=False (WaitingForGateway) at +10.0s",
		},
		"NothingRecorded":    {want: `was "" at the start`},
		"FalseAtTheStart":    {ts: []transition{{at: at(0), status: "False"}}, want: `was "False" at the start`},
		"TrueJustAtTheStart": {ts: []transition{{at: at(10), status: "True"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := trueThroughout(tc.ts, at(10), at(60))
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("trueThroughout(...) = %q, want %q", got, tc.want)
			}
		})
	}
}
