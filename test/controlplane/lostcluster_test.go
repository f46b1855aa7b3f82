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

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
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
	// requirements stop changing (crossplane v2.3.0 and v2.2.0
	// internal/xfn/required_resources.go, FetchingFunctionRunner.RunFunction).
	reconciles := bursts(calls, time.Second)
	if msg := stuckReconcilesProblem(len(reconciles), window); msg != "" {
		t.Errorf("Crossplane reconciled the ModelRoute on the lost gateway %d times in %s: %s; calls at %v", len(reconciles), window, msg, calls)
	}
	sc.sp.record("scenario-5d", "stuck-route-reconciles", float64(len(reconciles)))
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

// A ModelRoute that waits for a gateway stuck in a state only a person
// ends is looked at every route.StuckGatewayRequeue; over a window, about
// window/route.StuckGatewayRequeue times. The count may exceed that by
// stuckExtraLooks, for watch events (the route's Objects may still change
// now and then), and miss it by stuckMissedLooks: controller-runtime
// queues the next look when a reconcile ends (RequeueAfter), so each look
// is late by the reconcile itself and the time in the work queue, seconds
// on two loaded cores. A route looked at less often than that is not
// looked at again as it promises; one looked at more often spins.
const (
	stuckExtraLooks  = 4
	stuckMissedLooks = 3
)

// stuckReconcilesProblem returns "" if reconciles, the count of a stuck
// route's reconciles over window, is what route.StuckGatewayRequeue
// promises, or what is wrong with it.
func stuckReconcilesProblem(reconciles int, window time.Duration) string {
	looks := int(window / route.StuckGatewayRequeue)
	switch lo, hi := looks-stuckMissedLooks, looks+stuckExtraLooks; {
	case reconciles < lo:
		return fmt.Sprintf("want at least %d (every %s, %d missed at most): the route is not looked at again", lo, route.StuckGatewayRequeue, stuckMissedLooks)
	case reconciles > hi:
		return fmt.Sprintf("want at most %d (every %s, %d watch events at most): the route spins", hi, route.StuckGatewayRequeue, stuckExtraLooks)
	}
	return ""
}

// composedMessage is the message of the line the function logs for each
// call it answers with a composition (fn/fn.go, Function.RunFunction), at
// debug level, which the suite runs it at. The reconcile counts rest on it.
const composedMessage = "Composed"

// functionCallTimes returns when the function composed the XR of kind
// and name between from and to, by its log, in order.
func (c *cluster) functionCallTimes(kind, name string, from, to time.Time) ([]time.Time, error) {
	all, err := c.functionCallsByName(kind, from, to)
	return all[name], err
}

// functionCallsByName returns when the function composed each XR of kind
// between from and to, by its log, in order, by the XR's name.
func (c *cluster) functionCallsByName(kind string, from, to time.Time) (map[string][]time.Time, error) {
	path := filepath.Join(c.ps.logDir, "function.log")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out, err := parseFunctionCalls(string(b), kind, from, to)
	if err != nil {
		return nil, fmt.Errorf("cannot count the function's calls in %s: %w", path, err)
	}
	return out, nil
}

// composedLine is one composedMessage line of the function's log: the XR's
// name, when, and the line.
type composedLine struct {
	name string
	at   time.Time
	line string
}

// readComposed returns the function's composedMessage lines for XRs of
// kind, in order. A missing line must mean no call, not a line the parser
// no longer reads: it fails if no line of the whole log is a
// composedMessage line for kind, or if one is but its time or name does
// not parse, since then the function's log has changed under the suite.
func readComposed(log, kind string) ([]composedLine, error) {
	var out []composedLine
	for l := range strings.SplitSeq(log, "\n") {
		if !strings.Contains(l, "\t"+composedMessage+"\t") || !strings.Contains(l, `"xr-kind": "`+kind+`"`) {
			continue
		}
		_, rest, ok := strings.Cut(l, `"xr-name": "`)
		name, _, _ := strings.Cut(rest, `"`)
		ts, _, _ := strings.Cut(l, "\t")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if !ok || name == "" || err != nil {
			return nil, fmt.Errorf("cannot read the XR's name and the time of the function's log line %q: the suite's parser no longer matches fn/fn.go", l)
		}
		out = append(out, composedLine{name: name, at: at, line: l})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %q line for a %s in the whole log: the suite's parser no longer matches fn/fn.go, or the function does not log at debug level", composedMessage, kind)
	}
	return out, nil
}

// parseFunctionCalls returns when the function composed each XR of kind
// between from and to, by its log (readComposed), in order, by the XR's
// name.
func parseFunctionCalls(log, kind string, from, to time.Time) (map[string][]time.Time, error) {
	lines, err := readComposed(log, kind)
	if err != nil {
		return nil, err
	}
	out := map[string][]time.Time{}
	for _, l := range lines {
		if !l.at.Before(from) && l.at.Before(to) {
			out[l.name] = append(out[l.name], l.at)
		}
	}
	return out, nil
}

// functionVerdicts returns, by the XR's name, what the function computed
// of condType for each XR of kind between from and to, by its log
// (parseFunctionVerdicts).
func (c *cluster) functionVerdicts(kind, condType string, from, to time.Time) (map[string][]fnVerdict, error) {
	path := filepath.Join(c.ps.logDir, "function.log")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out, err := parseFunctionVerdicts(string(b), kind, condType, from, to)
	if err != nil {
		return nil, fmt.Errorf("cannot read the function's verdicts in %s: %w", path, err)
	}
	return out, nil
}

// fnVerdict is one call of the function for an XR, by its log: when, the
// status it computed for the condition, and whether it read the XR's
// InferenceGateway as GatewayReady=False (a ModelRoute's "gateway"
// evidence, internal/route gatewayView.evidence).
type fnVerdict struct {
	at                  time.Time
	ready, gatewayFalse bool
}

// parseFunctionVerdicts returns what the function computed of condType for
// each XR of kind between from and to, in order, by its log's
// composedMessage lines, which carry each condition as
// "<Type>": "<true|false>/<Reason>" (fn/fn.go). No verdict for an XR must
// mean no call, not a line the parser no longer reads: it fails as
// readComposed does, and also if no line of kind carries condType at all,
// or one carries it in another form.
func parseFunctionVerdicts(log, kind, condType string, from, to time.Time) (map[string][]fnVerdict, error) {
	lines, err := readComposed(log, kind)
	if err != nil {
		return nil, err
	}
	out := map[string][]fnVerdict{}
	seen, readGateway := 0, 0
	key := `"` + condType + `": "`
	for _, l := range lines {
		_, rest, ok := strings.Cut(l.line, key)
		if !ok {
			continue
		}
		seen++
		v, _, _ := strings.Cut(rest, `"`)
		status, _, _ := strings.Cut(v, "/")
		if status != "true" && status != "false" {
			return nil, fmt.Errorf("cannot read %s's status in the function's log line %q: the suite's parser no longer matches fn/fn.go", condType, l.line)
		}
		_, gw, _ := strings.Cut(l.line, `"gateway": "`)
		gw, _, _ = strings.Cut(gw, `"`)
		if strings.Contains(gw, " "+gateway.ConditionType+"=True since ") || strings.Contains(gw, " "+gateway.ConditionType+"=False since ") {
			readGateway++
		}
		if !l.at.Before(from) && l.at.Before(to) {
			out[l.name] = append(out[l.name], fnVerdict{at: l.at, ready: status == "true", gatewayFalse: strings.Contains(gw, " "+gateway.ConditionType+"=False since ")})
		}
	}
	if seen == 0 {
		return nil, fmt.Errorf("no %q line for a %s carries %s in the whole log: the suite's parser no longer matches fn/fn.go", composedMessage, kind, condType)
	}
	// Without the gateway's verdict in any line, no call would ever have
	// read the gateway as not ready, and every early True would pass for a
	// replay.
	if kind == "ModelRoute" && readGateway == 0 {
		return nil, fmt.Errorf("no %q line for a %s carries the gateway's verdict as \"gateway\": \"<name> %s=<True|False> since <time>\" in the whole log: the suite's parser no longer matches internal/route's evidence", composedMessage, kind, gateway.ConditionType)
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
