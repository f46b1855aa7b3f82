package fn

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/response"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/route"
)

// gatewayFalseSince is a rolling gateway whose not-ready spell began at.
func gatewayFalseSince(at time.Time) obj {
	return gatewayWithCondition(at, "False", "OldReplicasPresent")
}

// gatewayTrueSince is a gateway whose observed GatewayReady has been True
// since at.
func gatewayTrueSince(at time.Time) obj {
	return gatewayWithCondition(at, "True", "Serving")
}

func gatewayWithCondition(at time.Time, status, reason string) obj {
	xr := gatewayXR(nil)
	xr["status"] = obj{"conditions": []any{obj{"type": "GatewayReady", "status": status, "reason": reason, "lastTransitionTime": at.UTC().Format(time.RFC3339)}}}
	if status != "True" {
		xr["status"].(obj)["notReadySince"] = at.UTC().Format(time.RFC3339)
	}
	return xr
}

// gatewayResponsive is a ready gateway whose Responsive condition has had
// status since at.
func gatewayResponsive(at time.Time, status string) obj {
	xr := gatewayTrueSince(at.Add(-time.Hour))
	xr["status"].(obj)["conditions"] = append(xr["status"].(obj)["conditions"].([]any),
		obj{"type": "Responsive", "status": status, "reason": "WatchCircuitOpen", "lastTransitionTime": at.UTC().Format(time.RFC3339)})
	return xr
}

// routeResponsive gives a ModelRoute a Responsive condition that has had
// status since at.
func routeResponsive(xr obj, at time.Time, status string) obj {
	st, _ := xr["status"].(obj)
	if st == nil {
		st = obj{}
		xr["status"] = st
	}
	conds, _ := st["conditions"].([]any)
	st["conditions"] = append(conds, obj{"type": "Responsive", "status": status, "reason": "WatchCircuitOpen", "lastTransitionTime": at.UTC().Format(time.RFC3339)})
	return xr
}

func TestTTL(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rolled := deploymentManifest(2, 2, true, 2, 2, 2)
	rolling := deploymentManifest(3, 3, true, 3, 1, 2)
	ab := []obj{backend("a", 1, 1, "key-a"), backend("b", 0, 1, "")}
	cases := map[string]struct {
		reason string
		req    *fnv1.RunFunctionRequest
		fatal  bool
		want   time.Duration
	}{
		"GatewayReady": {
			reason: "A ready gateway is reconciled at the SDK's default TTL.",
			req:    newRequest(t, gatewayXR(nil), observedGateway("203.0.113.10", true, rolled, true), nil),
			want:   response.DefaultTTL,
		},
		"GatewayReadyBreakerOpen": {
			reason: "A ready gateway whose watch events Crossplane's circuit breaker holds back looks again at the back-off's slowest, not at the one-minute TTL.",
			req:    newRequest(t, gatewayResponsive(now.Add(-time.Minute), "False"), observedGateway("203.0.113.10", true, rolled, true), nil),
			want:   compose.GatewayBackoff.Max,
		},
		"GatewayReadyBreakerClosedAgain": {
			reason: "Responsive=False for longer than the breaker's cooldown: the breaker is closed; the SDK's default TTL.",
			req:    newRequest(t, gatewayResponsive(now.Add(-6*time.Minute), "False"), observedGateway("203.0.113.10", true, rolled, true), nil),
			want:   response.DefaultTTL,
		},
		"GatewayReadyResponsive": {
			reason: "Responsive=True: watch events arrive; the SDK's default TTL.",
			req:    newRequest(t, gatewayResponsive(now.Add(-time.Minute), "True"), observedGateway("203.0.113.10", true, rolled, true), nil),
			want:   response.DefaultTTL,
		},
		"GatewayRollingOut": {
			reason: "GatewayReady just turned False: look again in a second, because the watch events that end the rollout may be held back by Crossplane's circuit breaker.",
			req:    newRequest(t, gatewayXR(nil), observedGateway("203.0.113.10", true, rolling, true), nil),
			want:   time.Second,
		},
		"GatewayRollingOutFor90s": {
			reason: "False for 90 s: a quarter of the spell is more than the back-off's slowest, 10 s.",
			req:    newRequest(t, gatewayFalseSince(now.Add(-90*time.Second)), observedGateway("203.0.113.10", true, rolling, true), nil),
			want:   10 * time.Second,
		},
		"GatewayRollingOutFor5m": {
			reason: "False for 5 minutes: every 10 s.",
			req:    newRequest(t, gatewayFalseSince(now.Add(-5*time.Minute)), observedGateway("203.0.113.10", true, rolling, true), nil),
			want:   10 * time.Second,
		},
		"GatewayRollingOutFor20m": {
			reason: "False for 20 minutes: still every 10 s; one gateway costs little.",
			req:    newRequest(t, gatewayFalseSince(now.Add(-20*time.Minute)), observedGateway("203.0.113.10", true, rolling, true), nil),
			want:   10 * time.Second,
		},
		"GatewayWasTrue": {
			reason: "The observed condition is still True from before: this is the first second of a False spell.",
			req:    newRequest(t, gatewayTrueSince(now.Add(-time.Hour)), observedGateway("203.0.113.10", true, rolling, true), nil),
			want:   time.Second,
		},
		"GatewayRollingOutFor12s": {
			reason: "False for 12 s: a quarter of the spell, 3 s.",
			req:    newRequest(t, gatewayFalseSince(now.Add(-12*time.Second)), observedGateway("203.0.113.10", true, rolling, true), nil),
			want:   3 * time.Second,
		},
		"GatewaySecretsMissing": {
			reason: "Waiting for a person to create callers' Secrets: no hurry.",
			req:    newRequest(t, gatewayXR(authSpec()), authObserved(nil), map[string][]obj{"caller-secrets": {}}),
			want:   notReadyTTL,
		},
		"RouteReady": {
			reason: "A routing ModelRoute rests for ten minutes: its gateway and its sources wake it through watched Objects.",
			req:    newRequest(t, routeXR(ab...), observedRoute(true), map[string][]obj{"gateway": gwReady, "secret-key-a": keyA}),
			want:   route.ReadyRequeue,
		},
		"RouteReadyBreakerOpen": {
			reason: "A routing ModelRoute whose watch events Crossplane's circuit breaker holds back (its creation burst) looks at its gateway again every 30 s, the breaker's half-open interval, not at ten minutes.",
			req:    newRequest(t, routeResponsive(routeXR(ab...), now.Add(-time.Minute), "False"), observedRoute(true), map[string][]obj{"gateway": gwReady, "secret-key-a": keyA}),
			want:   route.HeldBackRoutingRequeue,
		},
		"RouteReadyBreakerClosedAgain": {
			reason: "Responsive=False for longer than the breaker's cooldown: the breaker is closed; rest for ten minutes.",
			req:    newRequest(t, routeResponsive(routeXR(ab...), now.Add(-6*time.Minute), "False"), observedRoute(true), map[string][]obj{"gateway": gwReady, "secret-key-a": keyA}),
			want:   route.ReadyRequeue,
		},
		"RouteWaitingForGateway": {
			reason: "A ModelRoute learns of its gateway only through required resources, which Crossplane does not watch: look again in 2 s, the back-off's first step.",
			req:    newRequest(t, routeXR(ab...), observedRoute(true), map[string][]obj{"gateway": gwRolling, "secret-key-a": keyA}),
			want:   2 * time.Second,
		},
		"Fatal": {
			reason: "A Fatal result keeps the default TTL: the input needs a person, not a quicker retry.",
			req:    newRequest(t, gatewayXR(obj{"providerConfigName": 7}), nil, nil),
			fatal:  true,
			want:   response.DefaultTTL,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newAt(now)
			rsp, err := f.RunFunction(t.Context(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			fatal := len(rsp.GetResults()) > 0 && rsp.GetResults()[0].GetSeverity() == fnv1.Severity_SEVERITY_FATAL
			if fatal != tc.fatal {
				t.Fatalf("%s\nRunFunction(...): fatal %t, want %t: %v", tc.reason, fatal, tc.fatal, rsp.GetResults())
			}
			if diff := cmp.Diff(tc.want, rsp.GetMeta().GetTtl().AsDuration()); diff != "" {
				t.Errorf("%s\nRunFunction(...).Meta.Ttl: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// crossplaneWritesStatus is the observed composite of the next reconcile:
// xr with the status Crossplane writes from rsp at now. The function's
// desired status replaces the fields it owned before, so a field it stops
// sending goes (server-side apply, crossplane v2.2.0 and v2.3.0
// composition_functions.go, FunctionComposer.Compose); each condition it
// returns replaces the stored one, stamped now, unless type, status,
// reason and message are all equal (crossplane-runtime v2.2.0
// apis/common/condition.go, in v2.3.0 the crossplane/apis/v2 module's
// core/v2/condition.go, ConditionedStatus.SetConditions), so a new
// message restarts lastTransitionTime.
func crossplaneWritesStatus(t *testing.T, xr obj, rsp *fnv1.RunFunctionResponse, now time.Time) obj {
	t.Helper()
	var conds []any
	if st, ok := xr["status"].(obj); ok {
		conds, _ = st["conditions"].([]any)
	}
	st := obj{}
	maps.Copy(st, status(rsp))
	for _, c := range rsp.GetConditions() {
		s := strings.TrimPrefix(c.GetStatus().String(), "STATUS_CONDITION_")
		nc := obj{"type": c.GetType(), "status": strings.ToUpper(s[:1]) + strings.ToLower(s[1:]), "reason": c.GetReason(), "message": c.GetMessage(), "lastTransitionTime": now.UTC().Format(time.RFC3339)}
		found := false
		for i, o := range conds {
			oc := o.(obj)
			if oc["type"] != nc["type"] {
				continue
			}
			found = true
			if oc["status"] != nc["status"] || oc["reason"] != nc["reason"] || oc["message"] != nc["message"] {
				conds[i] = nc
			}
		}
		if !found {
			conds = append(conds, nc)
		}
	}
	st["conditions"] = conds
	next := obj{}
	maps.Copy(next, xr)
	next["status"] = st
	return next
}

// TestNotReadySpell checks, over several reconciles that each see the
// status Crossplane wrote from the one before, that the back-off runs
// from the start of the not-ready spell the function records in
// status.notReadySince: a new message, which restarts the condition's
// lastTransitionTime, does not restart it; True clears it; and a
// ModelRoute whose gateway does not report, has lost its cluster, or
// disagrees with its gateway-status ConfigMap backs off from 2 s to
// route.StuckGatewayRequeue, yet follows a recovery at once.
func TestNotReadySpell(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ab := []obj{backend("a", 1, 1, "key-a"), backend("b", 0, 1, "")}
	rolling := func(updated float64) map[string]obj {
		return observedGateway("203.0.113.10", true, deploymentManifest(3, 3, true, 3, updated, 2), true)
	}
	rolled := observedGateway("203.0.113.10", true, deploymentManifest(3, 3, true, 3, 3, 3), true)
	// gatewayIs is the required InferenceGateway with GatewayReady.
	gatewayIs := func(status, reason, message string) map[string][]obj {
		gw := inferenceGateway(false, reason, false)
		gw["status"].(obj)["conditions"] = []any{obj{"type": "GatewayReady", "status": status, "reason": reason, "message": message}}
		return map[string][]obj{"gateway": {gw}, "secret-key-a": keyA}
	}
	fatal := func(n int) map[string][]obj {
		return gatewayIs("Unknown", "FatalError", fmt.Sprintf("A fatal error occurred before the status of this condition could be determined (attempt %d).", n))
	}
	lost := gatewayIs("False", "ClusterAlreadyHasGateway", `the InferenceGateway "other" already composes the gateway on the cluster`)
	routeSees := func(cm obj) map[string]obj {
		o := observedRoute(true)
		o["gateway-status"] = cm
		return o
	}
	cmTrue := statusObject("True", "Serving", true)
	cmFalse := statusObject("False", "OldReplicasPresent", true)
	// cmReportingSince is the ConfigMap of a gateway that reports again
	// since at.
	cmReportingSince := func(at time.Duration) obj {
		o := statusObject("True", "Serving", true)
		o["status"].(obj)["atProvider"].(obj)["manifest"].(obj)["data"].(obj)["reportingSince"] = t0.Add(at).Format(time.RFC3339)
		return o
	}

	type step struct {
		at       time.Duration
		observed map[string]obj
		required map[string][]obj
		// want
		condition string
		ttl       time.Duration
		// since is the recorded start of the spell, from t0; -1 for none.
		since time.Duration
	}
	cases := map[string]struct {
		reason string
		xr     obj
		steps  []step
	}{
		"GatewayRolloutCounters": {
			reason: "The rollout counters change GatewayReady's message on every reconcile; the back-off still grows from the spell's start (a second, a quarter of the spell, at most 10 s), and True ends the spell.",
			xr:     gatewayXR(nil),
			steps: []step{
				{at: 0, observed: rolling(1), condition: "GatewayReady=STATUS_CONDITION_FALSE/OldReplicasPresent", ttl: time.Second, since: 0},
				{at: 8 * time.Second, observed: rolling(2), condition: "GatewayReady=STATUS_CONDITION_FALSE/OldReplicasPresent", ttl: 2 * time.Second, since: 0},
				{at: time.Minute, observed: rolling(1), condition: "GatewayReady=STATUS_CONDITION_FALSE/OldReplicasPresent", ttl: 10 * time.Second, since: 0},
				{at: 200 * time.Second, observed: rolling(2), condition: "GatewayReady=STATUS_CONDITION_FALSE/OldReplicasPresent", ttl: 10 * time.Second, since: 0},
				{at: 210 * time.Second, observed: rolled, condition: "GatewayReady=STATUS_CONDITION_TRUE/Serving", ttl: response.DefaultTTL, since: -1},
				{at: 300 * time.Second, observed: rolling(1), condition: "GatewayReady=STATUS_CONDITION_FALSE/OldReplicasPresent", ttl: time.Second, since: 300 * time.Second},
			},
		},
		"RouteGatewayNotReporting": {
			reason: "The gateway's GatewayReady is Unknown after a Fatal result while its ConfigMap still says True: GatewayNotReporting, from 2 s doubling to 10 s whatever the message says. The gateway's first good reconcile writes reportingSince into the ConfigMap, whose event wakes the route: if the gateway's status has not landed yet, look again in 2 s; then RoutingReady follows, and the route rests.",
			xr:     routeXR(ab...),
			steps: []step{
				{at: 0, observed: routeSees(cmTrue), required: fatal(1), condition: "RoutingReady=STATUS_CONDITION_FALSE/GatewayNotReporting", ttl: 2 * time.Second, since: 0},
				{at: 6 * time.Second, observed: routeSees(cmTrue), required: fatal(2), condition: "RoutingReady=STATUS_CONDITION_FALSE/GatewayNotReporting", ttl: 6 * time.Second, since: 0},
				{at: time.Minute, observed: routeSees(cmTrue), required: fatal(2), condition: "RoutingReady=STATUS_CONDITION_FALSE/GatewayNotReporting", ttl: route.StuckGatewayRequeue, since: 0},
				{at: 2 * time.Minute, observed: routeSees(cmTrue), required: fatal(3), condition: "RoutingReady=STATUS_CONDITION_FALSE/GatewayNotReporting", ttl: route.StuckGatewayRequeue, since: 0},
				{at: 20 * time.Minute, observed: routeSees(cmTrue), required: fatal(4), condition: "RoutingReady=STATUS_CONDITION_FALSE/GatewayNotReporting", ttl: route.StuckGatewayRequeue, since: 0},
				{at: 20*time.Minute + 3*time.Second, observed: routeSees(cmReportingSince(20*time.Minute + 2*time.Second)), required: fatal(4), condition: "RoutingReady=STATUS_CONDITION_FALSE/GatewayNotReporting", ttl: 2 * time.Second, since: 0},
				{at: 20*time.Minute + 4*time.Second, observed: routeSees(cmReportingSince(20*time.Minute + 2*time.Second)), required: gatewayIs("True", "Serving", "serving"), condition: "RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted", ttl: route.ReadyRequeue, since: -1},
			},
		},
		"RouteGatewayLostCluster": {
			reason: "The gateway lost its cluster; the ConfigMap there is the winner's and says True: GatewayLostCluster, every 10 s from the start, since only a person ends it and the ConfigMap's watch brings the end.",
			xr:     routeXR(ab...),
			steps: []step{
				{at: 0, observed: routeSees(cmTrue), required: lost, condition: "RoutingReady=STATUS_CONDITION_FALSE/GatewayLostCluster", ttl: route.StuckGatewayRequeue, since: 0},
				{at: 5 * time.Minute, observed: routeSees(cmTrue), required: lost, condition: "RoutingReady=STATUS_CONDITION_FALSE/GatewayLostCluster", ttl: route.StuckGatewayRequeue, since: 0},
			},
		},
		"RouteGatewayStatusStale": {
			reason: "The gateway rolls out for 5 minutes (both say so: rest, the watch wakes the route); then its ConfigMap says True while its condition does not yet: a new spell, from 2 s doubling, so RoutingReady follows the condition within seconds; a disagreement that lasts (a provider without watches) backs off to 10 s.",
			xr:     routeXR(ab...),
			steps: []step{
				{at: 0, observed: routeSees(cmFalse), required: gatewayIs("False", "OldReplicasPresent", "1 of 3"), condition: "RoutingReady=STATUS_CONDITION_FALSE/WaitingForGateway", ttl: route.WatchedGatewayRequeue, since: 0},
				{at: 5 * time.Minute, observed: routeSees(cmTrue), required: gatewayIs("False", "OldReplicasPresent", "2 of 3"), condition: "RoutingReady=STATUS_CONDITION_FALSE/GatewayStatusStale", ttl: 2 * time.Second, since: 5 * time.Minute},
				{at: 5*time.Minute + 4*time.Second, observed: routeSees(cmTrue), required: gatewayIs("False", "OldReplicasPresent", "2 of 3"), condition: "RoutingReady=STATUS_CONDITION_FALSE/GatewayStatusStale", ttl: 4 * time.Second, since: 5 * time.Minute},
				{at: 6 * time.Minute, observed: routeSees(cmTrue), required: gatewayIs("False", "NoReplicaAvailable", "0 of 3"), condition: "RoutingReady=STATUS_CONDITION_FALSE/GatewayStatusStale", ttl: route.StuckGatewayRequeue, since: 5 * time.Minute},
				{at: 7 * time.Minute, observed: routeSees(cmTrue), required: gatewayIs("False", "OldReplicasPresent", "2 of 3"), condition: "RoutingReady=STATUS_CONDITION_FALSE/GatewayStatusStale", ttl: route.StuckGatewayRequeue, since: 5 * time.Minute},
				{at: 7*time.Minute + 5*time.Second, observed: routeSees(cmTrue), required: gatewayIs("True", "Serving", "serving"), condition: "RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted", ttl: route.ReadyRequeue, since: -1},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			xr := tc.xr
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				f := newAt(now)
				rsp, err := f.RunFunction(t.Context(), newRequest(t, xr, s.observed, s.required))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff([]string{s.condition}, summarize(rsp).Conditions); diff != "" {
					t.Fatalf("%s\nreconcile %d at %s: conditions: -want, +got:\n%s", tc.reason, i, s.at, diff)
				}
				if diff := cmp.Diff(s.ttl, rsp.GetMeta().GetTtl().AsDuration()); diff != "" {
					t.Errorf("%s\nreconcile %d at %s: TTL: -want, +got:\n%s", tc.reason, i, s.at, diff)
				}
				var want any
				if s.since >= 0 {
					want = t0.Add(s.since).Format(time.RFC3339)
				}
				if diff := cmp.Diff(want, status(rsp)["notReadySince"]); diff != "" {
					t.Errorf("%s\nreconcile %d at %s: status.notReadySince: -want, +got:\n%s", tc.reason, i, s.at, diff)
				}
				xr = crossplaneWritesStatus(t, xr, rsp, now)
			}
		})
	}
}

// TestBreakerCooldownFromInput checks that how long a tripped circuit
// breaker is taken to hold watch events back is the Input's
// circuitBreakerCooldown, Crossplane's 5 minutes by default.
func TestBreakerCooldownFromInput(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rolled := deploymentManifest(2, 2, true, 2, 2, 2)
	cases := map[string]struct {
		reason   string
		cooldown string
		want     time.Duration
	}{
		"Default": {
			reason: "Open for 6 minutes, past the default cooldown: the breaker is closed again; the SDK's default TTL.",
			want:   response.DefaultTTL,
		},
		"Longer": {
			reason:   "Crossplane runs with a 10-minute cooldown: open for 6 minutes still holds events back; look again every 10 s.",
			cooldown: "10m",
			want:     compose.GatewayBackoff.Max,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := newRequest(t, gatewayResponsive(now.Add(-6*time.Minute), "False"), observedGateway("203.0.113.10", true, rolled, true), nil)
			if tc.cooldown != "" {
				req.Input = mustStruct(t, obj{"apiVersion": "inferencegateway.fn.crossplane.io/v1beta1", "kind": "Input", "circuitBreakerCooldown": tc.cooldown})
			}
			f := newAt(now)
			rsp, err := f.RunFunction(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, rsp.GetMeta().GetTtl().AsDuration()); diff != "" {
				t.Errorf("%s\nTTL: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
