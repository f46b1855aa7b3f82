package compose

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestBackoffAfter checks that a back-off grows with the spell, between
// its bounds, and that a Divisor of 0 counts as 1. The steps are written
// out, not computed by the code under test.
func TestBackoffAfter(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		reason string
		b      Backoff
		spell  time.Duration
		want   time.Duration
	}{
		"Start":            {"A spell that just began waits the minimum.", Backoff{Min: 2 * time.Second, Max: time.Minute, Divisor: 1}, 0, 2 * time.Second},
		"Doubling":         {"Divisor 1: as long again as the spell so far.", Backoff{Min: 2 * time.Second, Max: time.Minute, Divisor: 1}, 7 * time.Second, 7 * time.Second},
		"Capped":           {"Never longer than Max.", Backoff{Min: 2 * time.Second, Max: time.Minute, Divisor: 1}, time.Hour, time.Minute},
		"Quarter":          {"Divisor 4: a quarter of the spell.", Backoff{Min: time.Second, Max: 10 * time.Second, Divisor: 4}, 20 * time.Second, 5 * time.Second},
		"ZeroDivisor":      {"Divisor 0 is taken as 1, not a panic.", Backoff{Min: time.Second, Max: 10 * time.Second}, 3 * time.Second, 3 * time.Second},
		"SinceInTheFuture": {"A spell that begins after now (clock skew) waits the minimum.", Backoff{Min: time.Second, Max: 10 * time.Second, Divisor: 1}, -time.Minute, time.Second},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.b.After(t0.Add(-tc.spell), t0)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nAfter(spell %s): -want, +got:\n%s", tc.reason, tc.spell, diff)
			}
		})
	}
}
