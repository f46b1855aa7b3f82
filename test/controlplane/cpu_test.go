package controlplane

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/procfs"
)

// suiteName names the test process itself in a cpuSample: its watchers,
// stand-ins and observers.
const suiteName = "suite (this test)"

// cpuSample is the CPU time, in seconds, that each process the suite
// started (with whatever it forked and still runs), and the suite itself,
// had used at a moment. A pid per name tells a restarted process from the
// one before it.
type cpuSample struct {
	at      time.Time
	seconds map[string]float64
	pids    map[string]int
}

// cpu samples the CPU time of every process the suite started that still
// runs, by process group (each is started in one of its own: startWith's
// and startIsolated's Setpgid), and
// of the suite's own process. It answers where two cores went while the
// control plane was slow: the suite cannot tell that from the API server.
func (ps *procs) cpu() cpuSample {
	s := cpuSample{at: time.Now(), seconds: map[string]float64{}, pids: map[string]int{}}
	all, err := procfs.AllProcs()
	if err != nil {
		return s
	}
	byGroup := map[int]float64{}
	for _, p := range all {
		st, err := p.Stat()
		if err != nil {
			continue // gone since the listing
		}
		byGroup[st.PGRP] += st.CPUTime()
	}
	ps.mu.Lock()
	started := append([]*proc(nil), ps.all...)
	ps.mu.Unlock()
	for _, p := range started {
		if !p.running() {
			continue
		}
		pid := p.cmd.Process.Pid
		s.seconds[p.name], s.pids[p.name] = byGroup[pid], pid
	}
	if self, err := procfs.Self(); err == nil {
		if st, err := self.Stat(); err == nil {
			s.seconds[suiteName], s.pids[suiteName] = st.CPUTime(), os.Getpid()
		}
	}
	return s
}

// cpuUse is the CPU time each process used between two samples.
type cpuUse struct {
	wall    time.Duration
	seconds map[string]float64
}

// since is the CPU time used from a to s. A process restarted in between
// (another pid under the same name) counts from its start.
func (s cpuSample) since(a cpuSample) cpuUse {
	u := cpuUse{wall: s.at.Sub(a.at), seconds: map[string]float64{}}
	for name, v := range s.seconds {
		if a.pids[name] == s.pids[name] {
			v -= a.seconds[name]
		}
		u.seconds[name] = v
	}
	return u
}

// total is the CPU time every process used.
func (u cpuUse) total() float64 {
	t := 0.0
	for _, v := range u.seconds {
		t += v
	}
	return t
}

// String says how much of the machine's cores the processes used, and
// each one's share, most first.
func (u cpuUse) String() string {
	names := make([]string, 0, len(u.seconds))
	for n := range u.seconds {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return u.seconds[names[i]] > u.seconds[names[j]] })
	total, capacity := u.total(), u.wall.Seconds()*float64(runtime.NumCPU())
	parts := make([]string, 0, len(names))
	for _, n := range names {
		if u.seconds[n] < 0.05 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.1f (%.0f%%)", n, u.seconds[n], 100*u.seconds[n]/max(total, 1e-9)))
	}
	return fmt.Sprintf("%.1f CPU-seconds in %s, %.0f%% of %d cores: %s",
		total, u.wall.Round(time.Second), 100*total/max(capacity, 1e-9), runtime.NumCPU(), strings.Join(parts, ", "))
}

func TestCPUSince(t *testing.T) {
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		a, b cpuSample
		want map[string]float64
	}{
		"SameProcesses": {
			a:    cpuSample{at: at, seconds: map[string]float64{"etcd": 10, "crossplane": 4}, pids: map[string]int{"etcd": 7, "crossplane": 8}},
			b:    cpuSample{at: at.Add(time.Minute), seconds: map[string]float64{"etcd": 12.5, "crossplane": 10}, pids: map[string]int{"etcd": 7, "crossplane": 8}},
			want: map[string]float64{"etcd": 2.5, "crossplane": 6},
		},
		"RestartedCountsFromItsStart": {
			a:    cpuSample{at: at, seconds: map[string]float64{"ai-gateway": 30}, pids: map[string]int{"ai-gateway": 9}},
			b:    cpuSample{at: at.Add(time.Minute), seconds: map[string]float64{"ai-gateway": 2}, pids: map[string]int{"ai-gateway": 21}},
			want: map[string]float64{"ai-gateway": 2},
		},
		"StartedSinceCountsWhole": {
			a:    cpuSample{at: at, seconds: map[string]float64{}, pids: map[string]int{}},
			b:    cpuSample{at: at.Add(time.Minute), seconds: map[string]float64{"cert-manager": 3}, pids: map[string]int{"cert-manager": 5}},
			want: map[string]float64{"cert-manager": 3},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.b.since(tc.a).seconds); diff != "" {
				t.Errorf("since: -want, +got:\n%s", diff)
			}
		})
	}
}

// TestCPUSelf reads this process's own CPU time from /proc, as cpu does
// for the control plane's: it must be there, and grow with work.
func TestCPUSelf(t *testing.T) {
	ps := &procs{tb: t}
	a := ps.cpu()
	if _, ok := a.seconds[suiteName]; !ok {
		t.Fatalf("cpu() has no entry for the suite's own process: %v", a.seconds)
	}
	for deadline := time.Now().Add(2 * time.Second); ; {
		u := ps.cpu().since(a)
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
