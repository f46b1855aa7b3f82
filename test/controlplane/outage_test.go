package controlplane

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/function-sdk-go/response"

	"github.com/modelplaneai/function-inference-gateway/internal/route"
)

// How ModelRoutes follow an outage of their gateway (issue 32, item 6).
// A rollout the suite holds keeps the gateway GatewayReady=False for long
// enough that every route must say so: each route looks at its gateway at
// the latest after its TTL. A short outage may pass a route by; what must
// never happen is a route that goes False only once its gateway is True
// again (a stale False) and stays so.
const (
	// outageHold is how long a held rollout keeps the gateway not ready at
	// the least: the longest TTL of a RoutingReady ModelRoute whose
	// breaker is closed (response.DefaultTTL; route.requeueAfter leaves it
	// to the default), so a route must hear of the outage by its own look
	// even if every watch event missed it.
	outageHold = response.DefaultTTL
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
	// events back backs off no further than compose.SlowRequeue, then the
	// default, response.DefaultTTL). The margin is for Crossplane's work
	// queue and the reconcile itself, which with a hundred routes on two
	// shared cores wait for each other.
	staleFalseBound = max(route.WatchedGatewayRequeue, response.DefaultTTL) + 30*time.Second
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
func statusAt(ts []transition, at time.Time) string {
	st := ""
	for _, tr := range ts {
		if tr.at.After(at) {
			break
		}
		st = tr.status
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
	stale    []staleFalse
}

// followOutage reads rt, one route's RoutingReady transitions, against
// gw, its gateway's GatewayReady transitions, for the outage from gf to
// gr, up to end (when the record was read).
func followOutage(gw, rt []transition, gf, gr, end time.Time) routeFollow {
	var f routeFollow
	downAt := time.Time{}
	if statusAt(rt, gf) == "False" {
		downAt = gf
	} else {
		for _, tr := range rt {
			if tr.status == "False" && !tr.at.Before(gf) && tr.at.Before(gr) {
				downAt = tr.at
				break
			}
		}
	}
	if !downAt.IsZero() {
		f.wentDown, f.down = true, downAt.Sub(gf)
		for _, tr := range rt {
			if tr.status == "True" && tr.at.After(downAt) {
				f.cameUp, f.up = true, tr.at.Sub(gr)
				break
			}
		}
	}
	for i, tr := range rt {
		if tr.status != "False" || tr.at.Before(gr) || tr.at.After(end) || (i > 0 && rt[i-1].status == "False") || statusAt(gw, tr.at) != "True" {
			continue
		}
		// It ends when the route is True again, or when the gateway
		// leaves True, which makes the False true.
		s := staleFalse{from: tr.at, open: true}
		until := end
		for _, n := range rt[i+1:] {
			if n.status != "False" && !n.at.After(end) {
				until, s.open = n.at, false
				break
			}
		}
		for _, g := range gw {
			if g.at.After(tr.at) && g.at.Before(until) && g.status != "True" {
				until, s.open = g.at, false
				break
			}
		}
		s.lasted = until.Sub(tr.at)
		f.stale = append(f.stale, s)
	}
	return f
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
		gw, _ := sc.w.transitions()
		if at, ok := firstAfter(gw, gf, "True"); ok {
			t.Errorf("GatewayReady=True at +%.1fs while the rollout's new pods were held", seconds(at.Sub(gf)))
			return
		}
		var up []string
		for _, n := range names {
			if f := followOutage(gw, sc.w.routeTransitions(teamControlNS, n), gf, time.Now(), time.Now()); !f.wentDown {
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
	var follows map[string]routeFollow
	for {
		now := time.Now()
		gw, _ := sc.w.transitions()
		follows = map[string]routeFollow{}
		open := false
		for _, n := range names {
			f := followOutage(gw, sc.w.routeTransitions(teamControlNS, n), gf, gr, now)
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
	staleRoutes, longest := 0, time.Duration(0)
	early, earliest := 0, time.Duration(0)
	for _, n := range names {
		f := follows[n]
		if len(f.stale) > 0 {
			staleRoutes++
			var spells []string
			for _, s := range f.stale {
				spells = append(spells, fmt.Sprintf("at %s for %s (open %t)", s.from.Format("15:04:05.000"), s.lasted.Round(time.Millisecond), s.open))
			}
			t.Logf("ModelRoute %s went RoutingReady=False after its gateway was True again: %s; its transitions since the outage began:\n%s",
				n, strings.Join(spells, ", "), formatTransitions(gf, since(sc.w.routeTransitions(teamControlNS, n), gf)))
		}
		// A route True again before its gateway said RoutingReady while
		// its gateway was not ready, which "comes back after" accepts.
		// It is named and recorded, not failed, until its cause (route
		// inputs that lag the gateway under load) is fixed: the test
		// README's TestScale100 section says what is known.
		if f.cameUp && f.up < 0 {
			early++
			earliest = max(earliest, -f.up)
			t.Logf("ModelRoute %s went RoutingReady=True %s before its gateway's GatewayReady=True, while the gateway was not ready; its transitions since the outage began:\n%s",
				n, (-f.up).Round(time.Millisecond), formatTransitions(gf, since(sc.w.routeTransitions(teamControlNS, n), gf)))
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
	sc.sp.record(key, "gateway-not-ready-seconds", seconds(gr.Sub(gf)))
	sc.sp.record(key, "routes-stale-false", float64(staleRoutes))
	sc.sp.record(key, "stale-false-max-seconds", seconds(longest))
	sc.sp.record(key, "routes-true-before-gateway", float64(early))
	sc.sp.record(key, "true-before-gateway-max-seconds", seconds(earliest))
	t.Logf("%s: GatewayReady=False for %s; %d of %d ModelRoutes went RoutingReady=False after it was True again, the longest for %s (bound %s)",
		key, gr.Sub(gf).Round(100*time.Millisecond), staleRoutes, len(names), longest.Round(100*time.Millisecond), staleFalseBound)
	return follows
}

// trueThroughout returns "" if ts, a route's recorded RoutingReady
// transitions, say it was True at from and stayed True until to, or what
// broke that.
func trueThroughout(ts []transition, from, to time.Time) string {
	if st := statusAt(ts, from); st != "True" {
		return fmt.Sprintf("RoutingReady was %q at the start, by the recorded transitions", st)
	}
	for _, tr := range ts {
		if tr.at.After(from) && !tr.at.After(to) && tr.status != "True" {
			return fmt.Sprintf("RoutingReady=%s (%s) at +%.1fs: %s", tr.status, tr.reason, seconds(tr.at.Sub(from)), tr.message)
		}
	}
	return ""
}

// recordedGateway waits until the world has recorded a GatewayReady
// transition to status at or after from, and returns when: a poll of the
// XR can see a change before the world's watch delivers it.
func (sc *scenarios) recordedGateway(t *testing.T, from time.Time, status string) time.Time {
	t.Helper()
	var at time.Time
	sc.eventually(t, waitSettle, "a recorded GatewayReady="+status+" transition", func(context.Context) string {
		gw, _ := sc.w.transitions()
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
