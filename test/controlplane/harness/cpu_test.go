package harness

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCPUSince(t *testing.T) {
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		a, b CPUSample
		want map[string]float64
	}{
		"SameProcesses": {
			a:    CPUSample{at: at, seconds: map[string]float64{"etcd": 10, "crossplane": 4}, pids: map[string]int{"etcd": 7, "crossplane": 8}},
			b:    CPUSample{at: at.Add(time.Minute), seconds: map[string]float64{"etcd": 12.5, "crossplane": 10}, pids: map[string]int{"etcd": 7, "crossplane": 8}},
			want: map[string]float64{"etcd": 2.5, "crossplane": 6},
		},
		"RestartedCountsFromItsStart": {
			a:    CPUSample{at: at, seconds: map[string]float64{"ai-gateway": 30}, pids: map[string]int{"ai-gateway": 9}},
			b:    CPUSample{at: at.Add(time.Minute), seconds: map[string]float64{"ai-gateway": 2}, pids: map[string]int{"ai-gateway": 21}},
			want: map[string]float64{"ai-gateway": 2},
		},
		"StartedSinceCountsWhole": {
			a:    CPUSample{at: at, seconds: map[string]float64{}, pids: map[string]int{}},
			b:    CPUSample{at: at.Add(time.Minute), seconds: map[string]float64{"cert-manager": 3}, pids: map[string]int{"cert-manager": 5}},
			want: map[string]float64{"cert-manager": 3},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.b.Since(tc.a).seconds); diff != "" {
				t.Errorf("since: -want, +got:\n%s", diff)
			}
		})
	}
}

// TestCPUSelf reads this process's own CPU time from /proc, as cpu does
// for the control plane's: it must be there, and grow with work.
func TestCPUSelf(t *testing.T) {
	ps := &Procs{tb: t}
	a := ps.CPU()
	if _, ok := a.seconds[suiteName]; !ok {
		t.Fatalf("cpu() has no entry for the suite's own process: %v", a.seconds)
	}
	for deadline := time.Now().Add(2 * time.Second); ; {
		u := ps.CPU().Since(a)
		if u.seconds[suiteName] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the suite's CPU time did not grow over 2 s of work: %s", u)
		}
		for i := range 1_000_000 {
			_ = fmt.Sprint(i)
		}
	}
}
