package harness

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestBreakersClosableAt checks when the replayed breakers may close: the
// last opening of any composite's breaker and the cooldown, and the zero
// time when none opened.
func TestBreakersClosableAt(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	// burst is n updates at at: 2n tokens, which opens a full bucket of
	// 100 at the 51st.
	burst := func(at time.Time, n int) []spend {
		out := make([]spend, n)
		for i := range out {
			out[i] = spend{at: at, source: "envoy-deployment", tokens: 2}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		spends map[string][]spend
		want   time.Time
	}{{
		name:   "no breaker opened",
		spends: map[string][]spend{"team/a": burst(t0, 40)},
	}, {
		name:   "one route's creation burst",
		spends: map[string][]spend{"team/a": burst(t0, 60)},
		want:   t0.Add(5 * time.Minute),
	}, {
		name: "the gateway opened last",
		spends: map[string][]spend{
			"team/a":                       burst(t0, 60),
			gatewayBreakerKey("gateway-1"): append(burst(t0, 10), burst(t0.Add(3*time.Minute), 60)...),
		},
		want: t0.Add(8 * time.Minute),
	}, {
		name: "an event after the cooldown closes it, and a second burst opens it again",
		spends: map[string][]spend{
			"team/a": append(append(burst(t0, 60), burst(t0.Add(6*time.Minute), 1)...), burst(t0.Add(6*time.Minute+time.Second), 60)...),
		},
		want: t0.Add(11*time.Minute + time.Second),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			w := &World{tb: t, spends: tc.spends}
			got := w.BreakersClosableAt(t0.Add(30 * time.Minute))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("breakersClosableAt(): -want +got:\n%s", diff)
			}
		})
	}
}
