package harness

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// suiteName names the test process itself in a CPUSample: its watchers,
// stand-ins and observers.
const suiteName = "suite (this test)"

// CPUSample is the CPU time, in seconds, that each process the suite
// started (with whatever it forked and still runs), and the suite itself,
// had used at a moment. A pid per name tells a restarted process from the
// one before it.
type CPUSample struct {
	at      time.Time
	seconds map[string]float64
	pids    map[string]int
}

// CPU samples the CPU time of every process the suite started that still
// runs, by process group (each is started in one of its own: startWith's
// and startIsolated's Setpgid), and
// of the suite's own process. It answers where two cores went while the
// control plane was slow: the suite cannot tell that from the API server.
func (ps *Procs) CPU() CPUSample {
	s := CPUSample{at: time.Now(), seconds: map[string]float64{}, pids: map[string]int{}}
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
	started := append([]*Proc(nil), ps.all...)
	ps.mu.Unlock()
	for _, p := range started {
		if !p.Running() {
			continue
		}
		pid := p.Cmd.Process.Pid
		s.seconds[p.name], s.pids[p.name] = byGroup[pid], pid
	}
	if self, err := procfs.Self(); err == nil {
		if st, err := self.Stat(); err == nil {
			s.seconds[suiteName], s.pids[suiteName] = st.CPUTime(), os.Getpid()
		}
	}
	return s
}

// CPUUse is the CPU time each process used between two samples.
type CPUUse struct {
	wall    time.Duration
	seconds map[string]float64
}

// Since is the CPU time used from a to s. A process restarted in between
// (another pid under the same name) counts from its start.
func (s CPUSample) Since(a CPUSample) CPUUse {
	u := CPUUse{wall: s.at.Sub(a.at), seconds: map[string]float64{}}
	for name, v := range s.seconds {
		if a.pids[name] == s.pids[name] {
			v -= a.seconds[name]
		}
		u.seconds[name] = v
	}
	return u
}

// total is the CPU time every process used.
func (u CPUUse) total() float64 {
	t := 0.0
	for _, v := range u.seconds {
		t += v
	}
	return t
}

// String says how much of the machine's cores the processes used, and
// each one's share, most first.
func (u CPUUse) String() string {
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
