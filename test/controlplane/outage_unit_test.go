package controlplane

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

func TestFollowOutage(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tr := func(s float64, status string) harness.Transition {
		return harness.Transition{At: at(s), Status: status}
	}
	// The gateway: True, False at +10 s for 70 s, True again at +80 s.
	// Its True at +80 s is etcd revision 100.
	gw := []harness.Transition{tr(0, "True"), tr(10, "False"), tr(80, "True")}
	gw[2].RV = 100
	written := func(s float64, rv int64) harness.Transition {
		return harness.Transition{At: at(s), Status: "True", RV: rv}
	}
	gf, gr := at(10), at(80)
	bound := 90 * time.Second
	cases := map[string]struct {
		reason   string
		rt       []harness.Transition
		end      float64
		held     bool
		want     routeFollow
		problems []string // substrings, one per problem
	}{
		"Followed": {
			reason: "The route went False during the outage and True after it: every promise kept.",
			rt:     []harness.Transition{tr(1, "True"), tr(15, "False"), tr(82, "True")},
			end:    200, held: true,
			want: routeFollow{wentDown: true, down: 5 * time.Second, cameUp: true, up: 2 * time.Second},
		},
		"FalseAtTheStart": {
			reason: "A route already False when the gateway went down went down with it.",
			rt:     []harness.Transition{tr(1, "True"), tr(9, "False"), tr(81, "True")},
			end:    200, held: true,
			want: routeFollow{wentDown: true, cameUp: true, up: time.Second},
		},
		"StayedTrueThroughAHeldOutage": {
			reason: "Issue 32 item 6: a route that never hears of its gateway's held outage fails.",
			rt:     []harness.Transition{tr(1, "True")},
			end:    200, held: true,
			want:     routeFollow{},
			problems: []string{"stayed RoutingReady=True"},
		},
		"StayedTrueThroughAShortOutage": {
			reason: "For an outage the suite did not hold, a route may stay True.",
			rt:     []harness.Transition{tr(1, "True")},
			end:    200,
			want:   routeFollow{},
		},
		"NeverCameBack": {
			reason: "A route that followed the gateway down must come back.",
			rt:     []harness.Transition{tr(1, "True"), tr(15, "False")},
			end:    200, held: true,
			want:     routeFollow{wentDown: true, down: 5 * time.Second},
			problems: []string{"not RoutingReady=True again"},
		},
		"WentDownOnlyAfterTheRecovery": {
			reason: "A False only after the gateway is True again is stale, not a follow: counted, within the bound.",
			rt:     []harness.Transition{tr(1, "True"), tr(85, "False"), tr(95, "True")},
			end:    200, held: true,
			want:     routeFollow{stale: []staleFalse{{from: at(85), lasted: 10 * time.Second}}},
			problems: []string{"stayed RoutingReady=True"},
		},
		"StaleFalseWithinTheBound": {
			reason: "A short outage missed, then a stale False that ends in time: no problem, one stale spell.",
			rt:     []harness.Transition{tr(1, "True"), tr(85, "False"), tr(100, "True")},
			end:    200,
			want:   routeFollow{stale: []staleFalse{{from: at(85), lasted: 15 * time.Second}}},
		},
		"StaleFalseBeyondTheBound": {
			reason: "A stale False that lasts longer than the bound breaks the promise.",
			rt:     []harness.Transition{tr(1, "True"), tr(15, "False"), tr(81, "True"), tr(90, "False"), tr(190, "True")},
			end:    300, held: true,
			want: routeFollow{wentDown: true, down: 5 * time.Second, cameUp: true, up: time.Second,
				stale: []staleFalse{{from: at(90), lasted: 100 * time.Second}}},
			problems: []string{"stayed so for 1m40s (ended)"},
		},
		"StaleFalseStillOpen": {
			reason: "A stale False still open when the record ends is measured to the end.",
			rt:     []harness.Transition{tr(1, "True"), tr(15, "False"), tr(81, "True"), tr(90, "False")},
			end:    200, held: true,
			want: routeFollow{wentDown: true, down: 5 * time.Second, cameUp: true, up: time.Second,
				stale: []staleFalse{{from: at(90), lasted: 110 * time.Second, open: true}}},
			problems: []string{"(still open)"},
		},
		"TrueBeforeTheGateway": {
			reason: "A route written True before its gateway's True (by resourceVersion) said RoutingReady while the gateway was not ready: the 100-route run's finding.",
			rt:     []harness.Transition{tr(1, "True"), tr(15, "False"), written(47, 90)},
			end:    200, held: true,
			want:     routeFollow{wentDown: true, down: 5 * time.Second, cameUp: true, up: -33 * time.Second, early: true},
			problems: []string{"while its gateway was still not GatewayReady"},
		},
		"SeenBeforeButWrittenAfter": {
			reason: "The watch may deliver the route's True before the gateway's: written after it, it followed.",
			rt:     []harness.Transition{tr(1, "True"), tr(15, "False"), written(79.9, 110)},
			end:    200, held: true,
			want: routeFollow{wentDown: true, down: 5 * time.Second, cameUp: true, up: -100 * time.Millisecond},
		},
		"NewReasonAfterTheRecoveryIsNoNewSpell": {
			reason: "A route False since the outage that changes its reason after the recovery has no stale spell.",
			rt:     []harness.Transition{tr(1, "True"), tr(15, "False"), {At: at(82), Status: "False", Reason: "Other"}, tr(84, "True")},
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
			wantProblems(t, tc.reason, got.problems(tc.held, bound), tc.problems)
		})
	}
}

// wantProblems fails t unless ps, what routeFollow.problems said, has one
// problem per substring of want, in order.
func wantProblems(t *testing.T, reason string, ps, want []string) {
	t.Helper()
	if len(ps) != len(want) {
		t.Fatalf("%s\nproblems(...) = %q, want %d matching %q", reason, ps, len(want), want)
	}
	for i, w := range want {
		if !strings.Contains(ps[i], w) {
			t.Errorf("%s\nproblems(...)[%d] = %q, want it to contain %q", reason, i, ps[i], w)
		}
	}
}

func TestStaleEndsWhenTheGatewayFallsAgain(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	gw := []harness.Transition{{At: at(0), Status: "True"}, {At: at(10), Status: "False"}, {At: at(20), Status: "True"}, {At: at(30), Status: "False"}}
	rt := []harness.Transition{{At: at(0), Status: "True"}, {At: at(25), Status: "False"}}
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
		ts   []harness.Transition
		want string // substring; "" for none
	}{
		"StayedTrue":          {ts: []harness.Transition{{At: at(0), Status: "True"}}},
		"FalseAfterTheWindow": {ts: []harness.Transition{{At: at(0), Status: "True"}, {At: at(70), Status: "False"}}},
		"FalseInTheWindow": {
			ts:   []harness.Transition{{At: at(0), Status: "True"}, {At: at(20), Status: "False", Reason: "WaitingForGateway"}, {At: at(21), Status: "True"}},
			want: "RoutingReady=False (WaitingForGateway) at +10.0s",
		},
		"NothingRecorded":    {want: `was "" at the start`},
		"FalseAtTheStart":    {ts: []harness.Transition{{At: at(0), Status: "False"}}, want: `was "False" at the start`},
		"TrueJustAtTheStart": {ts: []harness.Transition{{At: at(10), Status: "True"}}},
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

func TestFollowComputed(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tr := func(s float64, status string) harness.Transition {
		return harness.Transition{At: at(s), Status: status}
	}
	written := func(s float64, rv int64) harness.Transition {
		return harness.Transition{At: at(s), Status: "True", RV: rv}
	}
	// What the function computed: heard reads the gateway as not ready and
	// says False; said says True.
	heard := func(s float64) harness.FnVerdict { return harness.FnVerdict{At: at(s), GatewayFalse: true} }
	said := func(s float64) harness.FnVerdict { return harness.FnVerdict{At: at(s), Ready: true} }
	// The gateway: False at +10 s, True again at +80 s (revision 100).
	gw := []harness.Transition{tr(0, "True"), tr(10, "False"), written(80, 100)}
	gf, gr := at(10), at(80)
	// The route: down at +15 s, True written before the gateway's (a
	// replay, or the function's lie), down again, True after the gateway.
	replayed := []harness.Transition{tr(1, "True"), tr(15, "False"), written(47, 90), tr(48.5, "False"), written(82, 110)}
	cases := map[string]struct {
		reason      string
		rt          []harness.Transition
		fn          []harness.FnVerdict
		want        routeFollow
		wantReplays []time.Duration
		problems    []string // substrings, one per problem
	}{
		"ReplayTheFunctionNeverComputed": {
			reason: "The 100-route run: a True written before the gateway's, which the function never computed after it heard of the outage, " +
				"is Crossplane's replay; the route's return is its next True, after the gateway's.",
			rt:          replayed,
			fn:          []harness.FnVerdict{said(5), heard(12), heard(30), said(81.5)},
			want:        routeFollow{wentDown: true, down: 5 * time.Second, cameUp: true, up: 2 * time.Second},
			wantReplays: []time.Duration{1500 * time.Millisecond},
		},
		"TwoReplays": {
			reason:      "Each early True the function never computed is taken out in turn.",
			rt:          []harness.Transition{tr(1, "True"), tr(15, "False"), written(30, 60), tr(31, "False"), written(47, 90), tr(49, "False"), written(82, 110)},
			fn:          []harness.FnVerdict{heard(12), said(81.5)},
			want:        routeFollow{wentDown: true, down: 5 * time.Second, cameUp: true, up: 2 * time.Second},
			wantReplays: []time.Duration{time.Second, 2 * time.Second},
		},
		"TheFunctionComputedIt": {
			reason:   "A True the function computed after it read the gateway as not ready is its lie: it stays, and fails.",
			rt:       replayed,
			fn:       []harness.FnVerdict{heard(12), said(46.9)},
			want:     routeFollow{wentDown: true, down: 5 * time.Second, cameUp: true, up: -33 * time.Second, early: true},
			problems: []string{"while its gateway was still not GatewayReady"},
		},
		"HeardBeforeTheWatchSawIt": {
			reason:   "The function may read the gateway's False before the suite's watch sights it: a True after that read is still its own.",
			rt:       replayed,
			fn:       []harness.FnVerdict{heard(9), said(46.9)},
			want:     routeFollow{wentDown: true, down: 5 * time.Second, cameUp: true, up: -33 * time.Second, early: true},
			problems: []string{"while its gateway was still not GatewayReady"},
		},
		"SaidTrueBeforeItHeard": {
			reason: "The second 100-route run: a True the function computed from a stale read after the watch sighted the outage, " +
				"but before the function read it, was written before the route went down; the early True is a replay.",
			rt:          replayed,
			fn:          []harness.FnVerdict{said(10.3), heard(13), said(81.5)},
			want:        routeFollow{wentDown: true, down: 5 * time.Second, cameUp: true, up: 2 * time.Second},
			wantReplays: []time.Duration{1500 * time.Millisecond},
		},
		"ReplayStillStandingAtTheEnd": {
			reason:      "A replay with no later transition stood until the record ends, and the route never came back.",
			rt:          []harness.Transition{tr(1, "True"), tr(15, "False"), written(47, 90)},
			fn:          []harness.FnVerdict{heard(12)},
			want:        routeFollow{wentDown: true, down: 5 * time.Second},
			wantReplays: []time.Duration{153 * time.Second},
			problems:    []string{"not RoutingReady=True again"},
		},
		"NotEarly": {
			reason: "A route written True after its gateway needs no evidence.",
			rt:     []harness.Transition{tr(1, "True"), tr(15, "False"), written(82, 110)},
			want:   routeFollow{wentDown: true, down: 5 * time.Second, cameUp: true, up: 2 * time.Second},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, replays := followComputed(gw, tc.rt, gf, gr, at(200), tc.fn)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(routeFollow{}, staleFalse{})); diff != "" {
				t.Errorf("%s\nfollowComputed(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantReplays, replays); diff != "" {
				t.Errorf("%s\nfollowComputed(...) replays: -want, +got:\n%s", tc.reason, diff)
			}
			wantProblems(t, tc.reason, got.problems(true, 90*time.Second), tc.problems)
		})
	}
}

func TestGatewayComputed(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 13, 25, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tr := func(s float64, status string) harness.Transition {
		return harness.Transition{At: at(s), Status: status}
	}
	v := func(s float64, ready bool) harness.FnVerdict { return harness.FnVerdict{At: at(s), Ready: ready} }
	// The third 100-route run: the gateway went False (seen at +57.6 s; the
	// function said False from +51 s), showed True at +64.2 s while the
	// function still said False, and was True again at +75.6 s, which the
	// function said at +75.5 s.
	gw := []harness.Transition{tr(0, "True"), tr(57.6, "False"), tr(64.2, "True"), tr(65, "False"), tr(75.6, "True")}
	gf := at(57.6)
	cases := map[string]struct {
		reason      string
		fn          []harness.FnVerdict
		want        []harness.Transition
		wantReplays []time.Duration
	}{
		"ReplayInTheOutage": {
			reason:      "A True the function never said after it said False is Crossplane's replay: out of the record.",
			fn:          []harness.FnVerdict{v(10, true), v(51, false), v(57.6, false), v(66.7, false), v(75.5, true)},
			want:        []harness.Transition{tr(0, "True"), tr(57.6, "False"), tr(65, "False"), tr(75.6, "True")},
			wantReplays: []time.Duration{800 * time.Millisecond},
		},
		"TheFunctionSaidIt": {
			reason: "A True the function said while its pods were held is its verdict: it stays, for holdOutage to fail.",
			fn:     []harness.FnVerdict{v(51, false), v(64, true), v(66.7, false), v(75.5, true)},
			want:   gw,
		},
		"NoLog": {
			reason:      "With no verdict in the log, every True from gf on is taken out; gatewayRecord fails when the log cannot be read.",
			want:        []harness.Transition{tr(0, "True"), tr(57.6, "False"), tr(65, "False")},
			wantReplays: []time.Duration{800 * time.Millisecond, 0},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, replays := gatewayComputed(gw, gf, tc.fn)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(harness.Transition{})); diff != "" {
				t.Errorf("%s\ngatewayComputed(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantReplays, replays); diff != "" {
				t.Errorf("%s\ngatewayComputed(...) replays: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
