package controlplane

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/modelplaneai/function-inference-gateway/internal/route"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

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

func TestBursts(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse("15:04:05.000", s)
		harness.Must(t, err)
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
