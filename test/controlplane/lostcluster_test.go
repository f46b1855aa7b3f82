package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/modelplaneai/function-inference-gateway/internal/route"
)

// lostRoute names the ModelRoute scenario 5d puts on the second gateway,
// the one that lost the cluster.
const lostRoute = "on-lost-gateway"

// routeOnLostGateway is issue 21's item 4 for a lost cluster: a ModelRoute
// that names the InferenceGateway which lost its cluster says so,
// GatewayLostCluster, and does not spin. Its gateway's condition and the
// cluster's gateway-status ConfigMap disagree for good (the ConfigMap is
// the winner's, True), and only a person's act ends that, so the route is
// looked at again every 10 s (route.StuckGatewayRequeue), not every
// second: over a minute, Crossplane calls the function for it about once
// per 10 s, give or take a few watch events.
func (sc *scenarios) routeOnLostGateway(t *testing.T) {
	t.Helper()
	c := sc.c
	r := plainRoute(lostRoute, "lost."+teamControlNS+".svc.cluster.local")
	spec := r.Object["spec"].(map[string]any)
	spec["gatewayName"] = secondXRName
	c.apply(sc.ctx, r)
	sc.eventually(t, waitRoute, "the ModelRoute on the lost gateway to say GatewayLostCluster", func(ctx context.Context) string {
		u, err := sc.get(ctx, gvrModelRoute, teamControlNS, lostRoute)
		if err != nil {
			return err.Error()
		}
		if st, rs := conditionStatus(u, route.ConditionType), conditionReason(u, route.ConditionType); st != "False" || rs != route.ReasonGatewayLostCluster {
			return fmt.Sprintf("RoutingReady=%s (%s): %v", st, rs, condition(u, route.ConditionType)["message"])
		}
		return ""
	})
	u, _ := sc.get(sc.ctx, gvrModelRoute, teamControlNS, lostRoute)
	msg := fmt.Sprint(condition(u, route.ConditionType)["message"])
	if !strings.Contains(msg, secondXRName) {
		t.Errorf("RoutingReady's message does not name the gateway %q: %s", secondXRName, msg)
	}
	t.Logf("scenario 5d: the ModelRoute on the gateway that lost its cluster: RoutingReady=False (%s): %s", route.ReasonGatewayLostCluster, msg)

	// Let its creation's events pass, then count the calls.
	time.Sleep(20 * time.Second)
	from := time.Now()
	const window = 60 * time.Second
	time.Sleep(window)
	calls, err := c.functionCallTimes("ModelRoute", lostRoute, from, from.Add(window))
	must(t, err)
	// One reconcile calls the function twice, a few milliseconds apart:
	// the first call asks for the required resources (the InferenceGateway,
	// the API-key Secrets), and Crossplane calls again with them until the
	// requirements stop changing (crossplane v2.2.0
	// internal/xfn/required_resources.go, FetchingFunctionRunner.RunFunction).
	reconciles := bursts(calls, time.Second)
	// Six looks at 10 s, and four for watch events: the route's Objects
	// may still change now and then. A spin at 2 s would be thirty.
	if limit := int(window/route.StuckGatewayRequeue) + 4; len(reconciles) > limit {
		t.Errorf("Crossplane reconciled the ModelRoute on the lost gateway %d times in %s, want at most %d (every %s): calls at %v",
			len(reconciles), window, limit, route.StuckGatewayRequeue, calls)
	}
	t.Logf("scenario 5d: %d reconciles (%d function calls) of the ModelRoute on the lost gateway in %s, at %v", len(reconciles), len(calls), window, reconciles)
	sc.deleteRoute(t, lostRoute, "scenario 5d deletes its ModelRoute on the lost gateway")
}

// bursts groups times, in order, into runs whose neighbours are less
// than gap apart, and returns the first time of each.
func bursts(times []time.Time, gap time.Duration) []string {
	var out []string
	for i, at := range times {
		if i == 0 || at.Sub(times[i-1]) >= gap {
			out = append(out, at.Format("15:04:05.000"))
		}
	}
	return out
}

// functionCallTimes returns when the function composed the XR of kind
// and name between from and to, by its log, in order.
func (c *cluster) functionCallTimes(kind, name string, from, to time.Time) ([]time.Time, error) {
	all, err := c.functionCallsByName(kind, from, to)
	return all[name], err
}

// functionCallsByName returns when the function composed each XR of kind
// between from and to, by its log, in order, by the XR's name.
func (c *cluster) functionCallsByName(kind string, from, to time.Time) (map[string][]time.Time, error) {
	b, err := os.ReadFile(filepath.Join(c.ps.logDir, "function.log"))
	if err != nil {
		return nil, err
	}
	out := map[string][]time.Time{}
	for l := range strings.SplitSeq(string(b), "\n") {
		if !strings.Contains(l, "\tComposed\t") || !strings.Contains(l, `"xr-kind": "`+kind+`"`) {
			continue
		}
		_, rest, ok := strings.Cut(l, `"xr-name": "`)
		name, _, _ := strings.Cut(rest, `"`)
		ts, _, _ := strings.Cut(l, "\t")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if ok && err == nil && !at.Before(from) && at.Before(to) {
			out[name] = append(out[name], at)
		}
	}
	return out, nil
}

func TestBursts(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse("15:04:05.000", s)
		must(t, err)
		return v
	}
	cases := map[string]struct {
		times []time.Time
		want  []string
	}{
		"None":             {},
		"OneCall":          {times: []time.Time{at("10:00:00.000")}, want: []string{"10:00:00.000"}},
		"PairsTenSApart":   {times: []time.Time{at("10:00:00.000"), at("10:00:00.006"), at("10:00:10.000"), at("10:00:10.005")}, want: []string{"10:00:00.000", "10:00:10.000"}},
		"SpinAtTwoSeconds": {times: []time.Time{at("10:00:00.000"), at("10:00:02.000"), at("10:00:04.000")}, want: []string{"10:00:00.000", "10:00:02.000", "10:00:04.000"}},
		"ChainUnderAGap":   {times: []time.Time{at("10:00:00.000"), at("10:00:00.900"), at("10:00:01.800")}, want: []string{"10:00:00.000"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, bursts(tc.times, time.Second)); diff != "" {
				t.Errorf("bursts(...): -want, +got:\n%s", diff)
			}
		})
	}
}
