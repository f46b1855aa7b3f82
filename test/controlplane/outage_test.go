package controlplane

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/route"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// How ModelRoutes follow an outage of their gateway (issue 32, item 6).
// A rollout the suite holds keeps the gateway GatewayReady=False for long
// enough that every route must say so: the gateway-status ConfigMap's
// watch wakes each route. A short outage may pass a route by; what must
// never happen is a route that goes False only once its gateway is True
// again (a stale False) and stays so.
const (
	// outageHold is how long a held rollout keeps the gateway not ready at
	// the least (issue 32 asks for a minute). A resting route looks at its
	// gateway by itself only every route.ReadyRequeue, ten minutes: it
	// must hear of the outage through the gateway-status ConfigMap's
	// watch event, which a minute leaves ample time for, even with a
	// hundred routes queued at Crossplane.
	outageHold = time.Minute
	// outageHoldMax bounds how long the suite holds a rollout while it
	// waits for every route to go RoutingReady=False: three of the TTLs
	// that bound a route's look, so a route still True then has not
	// looked at its gateway for far longer than it promises.
	outageHoldMax = 3 * outageHold
	// staleFalseBound is the promise for a stale False: a ModelRoute that
	// goes RoutingReady=False while its gateway is GatewayReady=True read
	// a view of the gateway from before its recovery (Crossplane's cache
	// of the InferenceGateway, or the route's Object of the gateway-status
	// ConfigMap before provider-kubernetes saw it change). Its next look
	// reads the gateway as it is, and comes at the latest after the
	// longest TTL the function gives a route that waits for its gateway:
	// route.WatchedGatewayRequeue (GatewayStatusStale and
	// GatewayNotReporting look sooner, at the latest every
	// route.StuckGatewayRequeue; a route whose breaker holds its watch
	// events back backs off no further than route.HeldBackRoutingRequeue,
	// half as long).
	// The margin is for Crossplane's work queue and the reconcile itself,
	// which with a hundred routes on two shared cores wait for each other.
	staleFalseBound = route.WatchedGatewayRequeue + 30*time.Second
	// staleWatch is how long after the gateway's recovery the suite keeps
	// reading the routes' transitions for stale Falses, once every route
	// is True again: a reconcile that read the gateway before its recovery
	// writes within one reconcile, and a route's Object of the
	// gateway-status ConfigMap catches up with the provider's watch. What
	// it sees is counted (a figure) and each one checked against
	// staleFalseBound.
	staleWatch = 30 * time.Second
)

// statusAt returns the status the last transition at or before at set,
// or "" if none did.
func statusAt(ts []harness.Transition, at time.Time) string {
	st := ""
	for _, tr := range ts {
		if tr.At.After(at) {
			break
		}
		st = tr.Status
	}
	return st
}

// staleFalse is a spell of RoutingReady=False that began while the
// route's gateway was GatewayReady=True after an outage.
type staleFalse struct {
	from   time.Time
	lasted time.Duration
	open   bool // still False when the record ends
}

// routeFollow is what one ModelRoute's recorded RoutingReady transitions
// say of one outage of its gateway, GatewayReady=False from gf until gr.
type routeFollow struct {
	wentDown bool          // RoutingReady=False at some time in [gf, gr)
	down     time.Duration // from gf until it went False (0 if it was False at gf)
	cameUp   bool          // RoutingReady=True again after it went down
	up       time.Duration // from gr until it was True again (negative: the watch saw the route first)
	// early: that True was written before its gateway's GatewayReady=True
	// at gr (by resourceVersion), so while the gateway was not ready.
	early bool
	stale []staleFalse
}

// followOutage reads rt, one route's RoutingReady transitions, against
// gw, its gateway's GatewayReady transitions, for the outage from gf to
// gr, up to end (when the record was read).
func followOutage(gw, rt []harness.Transition, gf, gr, end time.Time) routeFollow {
	var f routeFollow
	downAt := time.Time{}
	if statusAt(rt, gf) == "False" {
		downAt = gf
	} else {
		for _, tr := range rt {
			if tr.Status == "False" && !tr.At.Before(gf) && tr.At.Before(gr) {
				downAt = tr.At
				break
			}
		}
	}
	if !downAt.IsZero() {
		f.wentDown, f.down = true, downAt.Sub(gf)
		for _, tr := range rt {
			if tr.Status == "True" && tr.At.After(downAt) {
				f.cameUp, f.up = true, tr.At.Sub(gr)
				for _, g := range gw {
					if g.Status == "True" && !g.At.Before(gr) {
						f.early = tr.RV != 0 && g.RV != 0 && tr.RV < g.RV
						break
					}
				}
				break
			}
		}
	}
	for i, tr := range rt {
		if tr.Status != "False" || tr.At.Before(gr) || tr.At.After(end) || (i > 0 && rt[i-1].Status == "False") || statusAt(gw, tr.At) != "True" {
			continue
		}
		// It ends when the route is True again, or when the gateway
		// leaves True, which makes the False true.
		s := staleFalse{from: tr.At, open: true}
		until := end
		for _, n := range rt[i+1:] {
			if n.Status != "False" && !n.At.After(end) {
				until, s.open = n.At, false
				break
			}
		}
		for _, g := range gw {
			if g.At.After(tr.At) && g.At.Before(until) && g.Status != "True" {
				until, s.open = g.At, false
				break
			}
		}
		s.lasted = until.Sub(tr.At)
		f.stale = append(f.stale, s)
	}
	return f
}

// heardLead is how long before gf, the watch's sighting of the gateway's
// GatewayReady=False, the function may have read that False already: the
// suite's watch lags the API server by seconds on a saturated machine
// (test/controlplane/README.md has the runs). A lead longer than the lag
// only makes followComputed take more Trues for the function's, the safe
// side.
const heardLead = time.Minute

// followComputed reads the outage as followOutage does, with fn, what the
// function's log has it compute for the route (parseFunctionVerdicts).
// A True written before the gateway's True (early) is the function's
// verdict only if the function computed RoutingReady=True after it had
// read its gateway as not ready (from heardLead before gf) and before the
// True's sighting: the function never goes back to an older gateway
// verdict once it has followed a newer one (status.followedGateway), so a
// True it computed before it heard of the outage was written before the
// route went down, and no True it computed after can be early unless that
// guard failed. Any other early True was not the function's: it was
// Crossplane re-applying the condition it had cached, from an XR its cache
// had not caught up on (crossplane/crossplane#7062), which stood past
// ReplayBound because the API server was slow to take the reconcile's
// status update (harness/replay.go). Such a True is taken out of rt and how
// long it stood returned; what is left is judged as the function's
// verdicts. A True the function did compute stays, and fails problems.
func followComputed(gw, rt []harness.Transition, gf, gr, end time.Time, fn []harness.FnVerdict) (routeFollow, []time.Duration) {
	var replays []time.Duration
	for {
		f := followOutage(gw, rt, gf, gr, end)
		if !f.early {
			return f, replays
		}
		// The True followOutage took for the route's return (f.up is its
		// time less gr).
		i := slices.IndexFunc(rt, func(tr harness.Transition) bool { return tr.Status == "True" && tr.At.Sub(gr) == f.up })
		if i < 0 || computedTrue(fn, gf.Add(-heardLead), rt[i].At, readGatewayFalse) {
			return f, replays
		}
		until := end
		if i+1 < len(rt) {
			until = rt[i+1].At
		}
		replays = append(replays, until.Sub(rt[i].At))
		rt = slices.Delete(slices.Clone(rt), i, i+1)
	}
}

// computedTrue reports whether fn has the function compute True, up to
// to, after a call from `from` on that heard of the outage.
func computedTrue(fn []harness.FnVerdict, from, to time.Time, heard func(harness.FnVerdict) bool) bool {
	h := false
	for _, v := range fn {
		if v.At.Before(from) || v.At.After(to) {
			continue
		}
		if h && v.Ready {
			return true
		}
		h = h || heard(v)
	}
	return false
}

// readGatewayFalse: a ModelRoute's call that read its gateway as not
// ready heard of the gateway's outage.
func readGatewayFalse(v harness.FnVerdict) bool { return v.GatewayFalse }

// saidFalse: an InferenceGateway's call that said GatewayReady=False heard
// of its own outage.
func saidFalse(v harness.FnVerdict) bool { return !v.Ready }

// gatewayComputed returns gw, the gateway's recorded GatewayReady
// transitions (recorded whole, replays included: onGateway), without the
// Trues from gf on that the function did not compute after it had said
// False (from heardLead before gf), with how long each stood. Such a True
// is Crossplane re-applying the gateway's conditions from a cached copy
// that had not caught up on its own False (crossplane/crossplane#7062);
// under load it can stand for seconds, and holdOutage would take it for
// the gateway's verdict and stop holding.
func gatewayComputed(gw []harness.Transition, gf time.Time, fn []harness.FnVerdict) ([]harness.Transition, []time.Duration) {
	var kept []harness.Transition
	var replays []time.Duration
	for i, tr := range gw {
		if tr.Status == "True" && !tr.At.Before(gf) && !computedTrue(fn, gf.Add(-heardLead), tr.At, saidFalse) {
			var stood time.Duration
			if i+1 < len(gw) {
				stood = gw[i+1].At.Sub(tr.At)
			}
			replays = append(replays, stood)
			continue
		}
		kept = append(kept, tr)
	}
	return kept, replays
}

// gatewayRecord returns the world's GatewayReady transitions with the
// Trues from gf on that the function did not compute taken out
// (gatewayComputed), and how long each of those stood. If the function's
// log cannot be read it fails t and returns the record whole, so that
// every True counts.
func (sc *scenarios) gatewayRecord(t *testing.T, gf time.Time) ([]harness.Transition, []time.Duration) {
	t.Helper()
	gw, _ := sc.w.Transitions()
	fn, err := sc.c.FunctionVerdicts("InferenceGateway", gateway.ConditionType, gf.Add(-heardLead), time.Now())
	if err != nil {
		t.Errorf("cannot tell Crossplane's replays of GatewayReady from the function's verdicts: %v", err)
		return gw, nil
	}
	return gatewayComputed(gw, gf, fn[harness.GatewayXRName])
}

// problems says which promise of a held outage the route broke: it must
// go RoutingReady=False while the gateway is not ready, be True again
// after, and leave no stale False for longer than bound.
func (f routeFollow) problems(held bool, bound time.Duration) []string {
	var out []string
	if held && !f.wentDown {
		out = append(out, "stayed RoutingReady=True while its gateway was held not ready")
	}
	if f.wentDown && !f.cameUp {
		out = append(out, "is not RoutingReady=True again after its gateway was")
	}
	if f.early {
		out = append(out, fmt.Sprintf("went RoutingReady=True again while its gateway was still not GatewayReady (its write came before the gateway's True, by resourceVersion; the watch saw it %s before)", (-f.up).Round(time.Millisecond)))
	}
	for _, s := range f.stale {
		if s.lasted > bound {
			state := "ended"
			if s.open {
				state = "still open"
			}
			out = append(out, fmt.Sprintf("went RoutingReady=False at %s, after its gateway was True again, and stayed so for %s (%s), more than %s",
				s.from.Format("15:04:05.000"), s.lasted.Round(time.Millisecond), state, bound))
		}
	}
	return out
}

// openStale reports whether a stale False of f is open and younger than
// bound: it may still end in time, so the record is read again later.
func (f routeFollow) openStale(bound time.Duration) bool {
	return slices.ContainsFunc(f.stale, func(s staleFalse) bool { return s.open && s.lasted <= bound })
}

// holdOutage keeps the rollout's new pods held (the kubelet stand-in
// does not start them; the caller released nothing yet) for at least
// outageHold after gf, when GatewayReady went False, and until every
// ModelRoute in names has gone RoutingReady=False since gf, or for
// outageHoldMax. It fails if the gateway was True again meanwhile: the
// held pods are the outage. It returns when it stopped holding; the
// caller releases the pods.
func (sc *scenarios) holdOutage(t *testing.T, names []string, gf time.Time) {
	t.Helper()
	for {
		gw, _ := sc.gatewayRecord(t, gf)
		if at, ok := firstAfter(gw, gf, "True"); ok {
			t.Errorf("GatewayReady=True at +%.1fs while the rollout's new pods were held", seconds(at.Sub(gf)))
			return
		}
		var up []string
		for _, n := range names {
			if f := followOutage(gw, sc.w.RouteTransitions(harness.TeamControlNS, n), gf, time.Now(), time.Now()); !f.wentDown {
				up = append(up, n)
			}
		}
		held := time.Since(gf)
		switch {
		case held >= outageHoldMax:
			t.Logf("stopped holding the rollout %s after GatewayReady=False, with %d ModelRoutes still RoutingReady=True: %v", held.Round(time.Second), len(up), up[:min(10, len(up))])
			return
		case held >= outageHold && len(up) == 0:
			return
		}
		select {
		case <-time.After(time.Second):
		case <-sc.ctx.Done():
			t.Fatal(sc.ctx.Err())
		}
	}
}

// checkFollow asserts, from the world's recorded transitions, the
// promises of the outage of the gateway from gf until gr for every
// ModelRoute in names (routeFollow.problems; held: the suite held it
// for outageHold at least), and records under key how long it lasted,
// how many routes went False while the gateway was True again, and the
// longest such spell. It first reads on until staleWatch after gr and
// until every stale False has ended or outlived staleFalseBound.
func (sc *scenarios) checkFollow(t *testing.T, key string, names []string, gf, gr time.Time, held bool) map[string]routeFollow {
	t.Helper()
	var (
		follows   map[string]routeFollow
		gw        []harness.Transition
		gwReplays []time.Duration
		rts       map[string][]harness.Transition
		now       time.Time
	)
	for {
		now = time.Now()
		gw, gwReplays = sc.gatewayRecord(t, gf)
		follows, rts = map[string]routeFollow{}, map[string][]harness.Transition{}
		open := false
		for _, n := range names {
			rts[n] = sc.w.RouteTransitions(harness.TeamControlNS, n)
			f := followOutage(gw, rts[n], gf, gr, now)
			follows[n] = f
			open = open || f.openStale(staleFalseBound)
		}
		if !open && now.Sub(gr) >= staleWatch {
			break
		}
		select {
		case <-time.After(time.Second):
		case <-sc.ctx.Done():
			t.Fatal(sc.ctx.Err())
		}
	}
	// Which Trues before the gateway's were the function's: by its log,
	// read once the record is complete. Unread, every such True stays the
	// function's and fails.
	verdicts, err := sc.c.FunctionVerdicts("ModelRoute", "RoutingReady", gf.Add(-heardLead), now)
	if err != nil {
		t.Errorf("cannot tell Crossplane's replays from the function's verdicts in the outage: %v", err)
	}
	staleRoutes, longest := 0, time.Duration(0)
	early, earliest := 0, time.Duration(0)
	replayedRoutes, longestReplay := 0, time.Duration(0)
	for _, n := range names {
		f := follows[n]
		if f.early && err == nil {
			var replays []time.Duration
			f, replays = followComputed(gw, rts[n], gf, gr, now, verdicts[n])
			follows[n] = f
			if len(replays) > 0 {
				replayedRoutes++
				for _, d := range replays {
					longestReplay = max(longestReplay, d)
				}
				t.Logf("UPSTREAM crossplane/crossplane#7062: ModelRoute %s showed RoutingReady=True while its gateway was not ready, for %v, which the function never computed (by its log, no RoutingReady=True after it read the gateway as not ready): Crossplane re-applied the condition from a stale cache, and the API server took its status update more than %s later",
					n, replays, harness.ReplayBound)
			}
		}
		if len(f.stale) > 0 {
			staleRoutes++
			var spells []string
			for _, s := range f.stale {
				spells = append(spells, fmt.Sprintf("at %s for %s (open %t)", s.from.Format("15:04:05.000"), s.lasted.Round(time.Millisecond), s.open))
			}
			t.Logf("ModelRoute %s went RoutingReady=False after its gateway was True again: %s; its transitions since the outage began:\n%s",
				n, strings.Join(spells, ", "), harness.FormatTransitions(gf, since(sc.w.RouteTransitions(harness.TeamControlNS, n), gf)))
		}
		// A route True again before its gateway said RoutingReady while
		// its gateway was not ready, which "comes back after" accepts:
		// problems fails it; its transitions show why.
		if f.early {
			early++
			earliest = max(earliest, -f.up)
			t.Logf("ModelRoute %s went RoutingReady=True before its gateway's GatewayReady=True, while the gateway was not ready; its transitions since the outage began:\n%s",
				n, harness.FormatTransitions(gf, since(sc.w.RouteTransitions(harness.TeamControlNS, n), gf)))
		}
		for _, s := range f.stale {
			longest = max(longest, s.lasted)
		}
		if len(names) <= 3 {
			t.Logf("ModelRoute %s: %s", n, f)
		}
		if ps := f.problems(held, staleFalseBound); len(ps) > 0 {
			t.Errorf("ModelRoute %s, for GatewayReady=False from %s for %s: %s", n, gf.Format("15:04:05.000"), gr.Sub(gf).Round(time.Millisecond), strings.Join(ps, "; "))
		}
	}
	sc.sp.Record(key, "gateway-not-ready-seconds", seconds(gr.Sub(gf)))
	sc.sp.Record(key, "routes-stale-false", float64(staleRoutes))
	sc.sp.Record(key, "stale-false-max-seconds", seconds(longest))
	sc.sp.Record(key, "routes-true-before-gateway", float64(early))
	sc.sp.Record(key, "true-before-gateway-max-seconds", seconds(earliest))
	if len(gwReplays) > 0 {
		t.Logf("UPSTREAM crossplane/crossplane#7062: the InferenceGateway showed GatewayReady=True in its outage for %v, which the function never computed (by its log, no GatewayReady=True after it said False): Crossplane re-applied the condition from a stale cache", gwReplays)
	}
	sc.sp.Record(key, "gateway-replayed-true", float64(len(gwReplays)))
	sc.sp.Record(key, "routes-replayed-true-before-gateway", float64(replayedRoutes))
	sc.sp.Record(key, "replayed-true-before-gateway-max-seconds", seconds(longestReplay))
	t.Logf("%s: GatewayReady=False for %s; %d of %d ModelRoutes went RoutingReady=False after it was True again, the longest for %s (bound %s)",
		key, gr.Sub(gf).Round(100*time.Millisecond), staleRoutes, len(names), longest.Round(100*time.Millisecond), staleFalseBound)
	return follows
}

// trueThroughout returns "" if ts, a route's recorded RoutingReady
// transitions, say it was True at from and stayed True until to, or what
// broke that.
func trueThroughout(ts []harness.Transition, from, to time.Time) string {
	if st := statusAt(ts, from); st != "True" {
		return fmt.Sprintf("RoutingReady was %q at the start, by the recorded transitions", st)
	}
	for _, tr := range ts {
		if tr.At.After(from) && !tr.At.After(to) && tr.Status != "True" {
			return fmt.Sprintf("RoutingReady=%s (%s) at +%.1fs: %s", tr.Status, tr.Reason, seconds(tr.At.Sub(from)), tr.Message)
		}
	}
	return ""
}

// recordedGateway waits until the world has recorded a GatewayReady
// transition to status at or after from, and returns when: a poll of the
// XR can see a change before the world's watch delivers it. A True the
// function never computed is no transition (gatewayComputed, with from as
// the outage's start).
func (sc *scenarios) recordedGateway(t *testing.T, from time.Time, status string) time.Time {
	t.Helper()
	var at time.Time
	sc.eventually(t, waitSettle, "a recorded GatewayReady="+status+" transition", func(context.Context) string {
		gw, _ := sc.w.Transitions()
		if status == "True" {
			// Not a True the function never computed (gatewayComputed).
			gw, _ = sc.gatewayRecord(t, from)
		}
		var ok bool
		if at, ok = firstAfter(gw, from, status); !ok {
			return "none yet"
		}
		return ""
	})
	return at
}

// String renders what the route did in the outage, for a log line.
func (f routeFollow) String() string {
	if !f.wentDown {
		return fmt.Sprintf("never went RoutingReady=False; %d stale Falses", len(f.stale))
	}
	up := "is not RoutingReady=True again"
	if f.cameUp {
		up = fmt.Sprintf("RoutingReady=True %s after GatewayReady was", f.up.Round(time.Millisecond))
	}
	return fmt.Sprintf("RoutingReady=False %s after GatewayReady, %s; %d stale Falses", f.down.Round(time.Millisecond), up, len(f.stale))
}
