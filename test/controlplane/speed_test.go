package controlplane

import (
	"testing"
	"time"

	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// How fast readiness follows the rollout, and what it costs the API
// server. Each scenario that measures records its events, in seconds from
// its own start, and its request rates; when CONTROLPLANE_TIMELINE names a
// file, the suite writes them there as one JSON object per scenario.

// Event names of the timeline file.
const (
	evObjectReady  = "object-ready"
	evGatewayReady = "gateway-ready"
	evRoutingReady = "routing-ready"
	evRolloutDone  = "rollout-complete"
	evRateAtRest   = "apiserver-requests-per-second-at-rest"
	evRateRollout  = "apiserver-requests-per-second-rollout"
	// evLostFinalizers counts, in scenario 6, the objects on the gateway
	// cluster whose AI Gateway finalizer the suite removed by hand
	// (aigwfinalizer_test.go): a count, not a time.
	evLostFinalizers = "aigw-2565-finalizers-removed"
)

// restWindow is how long the API server is watched while nothing happens:
// long enough that every XR's 60 s TTL fires at least once.
const restWindow = 90 * time.Second

// measureRest counts requests, and the CPU time of every process, over
// restWindow while nothing changes.
func (sc *scenarios) measureRest(t *testing.T) (harness.Rate, harness.CPUUse) {
	t.Helper()
	a, err := sc.c.CountRequests(sc.ctx)
	harness.Must(t, err)
	cpu, xp := sc.c.Procs.CPU(), sc.c.ModelRouteReconciles(sc.ctx)
	select {
	case <-time.After(restWindow):
	case <-sc.ctx.Done():
		t.Fatal(sc.ctx.Err())
	}
	b, err := sc.c.CountRequests(sc.ctx)
	harness.Must(t, err)
	t.Logf("Crossplane at rest: %s", sc.c.ModelRouteReconciles(sc.ctx).Since(xp))
	return sc.c.RateBetween(a, b), sc.c.Procs.CPU().Since(cpu)
}

// firstAfter returns the first transition to status at or after since.
func firstAfter(ts []harness.Transition, since time.Time, status string) (time.Time, bool) {
	for _, tr := range ts {
		if !tr.At.Before(since) && tr.Status == status {
			return tr.At, true
		}
	}
	return time.Time{}, false
}

// lastStatusBefore returns the last status recorded before at, or "".
func lastStatusBefore(ts []harness.Transition, at time.Time) string {
	st := ""
	for _, tr := range ts {
		if tr.At.Before(at) {
			st = tr.Status
		}
	}
	return st
}

// seconds is d in seconds, rounded to milliseconds.
func seconds(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond)) / float64(time.Second)
}

// restPastBreakers waits until Crossplane's circuit breakers of the
// composites are closed, so that the next rollout meets composites whose
// watch events flow, as on a gateway that has been live for a while, and
// then measures the request rate and CPU at rest (measureRest), from the
// time it returns: before that, composites whose breakers their creation
// opened still look at their gateway every few seconds
// (route.HeldBackRoutingRequeue), which is not the rest that lasts. A
// breaker stays open for its cooldown after a burst opened it (crossplane
// v2.3.0 and v2.2.0 --circuit-breaker-cooldown, five minutes by default)
// and closes at the first event after that (internal/circuit/
// token_bucket.go, RecordEvent): the wait ends 30 s after the last
// opening the replay saw and the cooldown (BreakersClosableAt), so that a
// route's back-off brings that first event.
func (sc *scenarios) restPastBreakers(t *testing.T) (harness.Rate, time.Time, harness.CPUUse) {
	t.Helper()
	quiet := sc.w.BreakersClosableAt(time.Now()).Add(30 * time.Second)
	wait := max(time.Until(quiet), 0)
	t.Logf("waiting %s for the circuit breakers to close (the last replayed opening, the cooldown and 30 s)", wait.Round(time.Second))
	select {
	case <-time.After(wait):
	case <-sc.ctx.Done():
		t.Fatal(sc.ctx.Err())
	}
	from := time.Now()
	r, cpu := sc.measureRest(t)
	return r, from, cpu
}
