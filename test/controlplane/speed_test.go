package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
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

// timelineEnv names the file the timelines go to.
const timelineEnv = "CONTROLPLANE_TIMELINE"

// restWindow is how long the API server is watched while nothing happens:
// long enough that every XR's 60 s TTL fires at least once.
const restWindow = 90 * time.Second

// speeds collects what the scenarios measured.
type speeds struct {
	mu sync.Mutex
	by map[string]map[string]float64
}

// record notes one value of a scenario.
func (s *speeds) record(scenario, event string, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string]map[string]float64{}
	}
	if s.by[scenario] == nil {
		s.by[scenario] = map[string]float64{}
	}
	s.by[scenario][event] = v
}

// write puts the timelines into the file CONTROLPLANE_TIMELINE names, if
// any, and logs them.
func (s *speeds) write(t *testing.T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := json.MarshalIndent(s.by, "", "  ")
	if err != nil {
		t.Errorf("cannot encode the timelines: %v", err)
		return
	}
	t.Logf("timelines and request rates:\n%s", b)
	if p := os.Getenv(timelineEnv); p != "" {
		// Each test of the suite writes its own scenarios into the one
		// file: the scenarios another test wrote before stay.
		all := map[string]map[string]float64{}
		if old, err := os.ReadFile(p); err == nil {
			_ = json.Unmarshal(old, &all)
		}
		maps.Copy(all, s.by)
		if b, err = json.MarshalIndent(all, "", "  "); err != nil {
			t.Errorf("cannot encode the timelines: %v", err)
			return
		}
		if err := os.WriteFile(p, append(b, '\n'), 0o600); err != nil {
			t.Errorf("cannot write %s=%s: %v (a relative path starts in test/controlplane, where go test runs the suite: give an absolute one)", timelineEnv, p, err)
		}
	}
}

// requests is the API server's count of requests so far, as its
// apiserver_request_total says, and when it was read. The audit log
// splits a window of them by client (auditClients).
type requests struct {
	at    time.Time
	total float64
}

// countRequests reads the API server's request counter.
func (c *cluster) countRequests(ctx context.Context) (requests, error) {
	r := requests{at: time.Now()}
	hc, err := rest.HTTPClientFor(c.cfg)
	if err != nil {
		return r, err
	}
	body, err := httpGet(ctx, hc, c.cfg.Host+"/metrics", "")
	if err != nil {
		return r, fmt.Errorf("cannot read the API server's /metrics: %w", err)
	}
	for l := range strings.SplitSeq(body, "\n") {
		if !strings.HasPrefix(l, "apiserver_request_total{") {
			continue
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return r, fmt.Errorf("cannot parse %q: %w", l, err)
		}
		r.total += v
	}
	return r, nil
}

// rate is requests per second between two counts, in all and for each
// client the audit log names in that window.
type rate struct {
	total    float64
	byClient map[string]float64
}

func (r rate) String() string {
	keys := make([]string, 0, len(r.byClient))
	for k := range r.byClient {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.1f", k, r.byClient[k])
	}
	return fmt.Sprintf("%.1f/s (%s)", r.total, strings.Join(parts, ", "))
}

// rateBetween is the request rate from a to b.
func (c *cluster) rateBetween(a, b requests) rate {
	secs := b.at.Sub(a.at).Seconds()
	r := rate{total: (b.total - a.total) / secs, byClient: map[string]float64{}}
	for k, n := range c.auditClients(a.at, b.at) {
		r.byClient[k] = float64(n) / secs
	}
	return r
}

// auditClients counts the requests the audit log recorded between from and
// to, by client: Crossplane, provider-kubernetes, kube-controller-manager,
// and the suite itself (its stand-ins and observers).
func (c *cluster) auditClients(from, to time.Time) map[string]int {
	return c.auditCount(from, to, func(string) bool { return true })
}

// auditCount counts the requests the audit log recorded between from and
// to whose verb matches, by client.
func (c *cluster) auditCount(from, to time.Time, match func(verb string) bool) map[string]int {
	out := map[string]int{}
	b, err := os.ReadFile(c.auditLog)
	if err != nil {
		c.tb.Logf("cannot read the audit log: %v", err)
		return out
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		var e struct {
			Stage     string    `json:"stage"`
			Verb      string    `json:"verb"`
			UserAgent string    `json:"userAgent"`
			Received  time.Time `json:"requestReceivedTimestamp"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Stage != "ResponseComplete" || e.Received.Before(from) || !e.Received.Before(to) || !match(e.Verb) {
			continue
		}
		out[clientOf(e.UserAgent)]++
	}
	return out
}

// writesBetween is the rate of writes (create, update, patch, delete)
// the audit log recorded from a to b, in all and by client.
func (c *cluster) writesBetween(a, b time.Time) rate {
	secs := b.Sub(a).Seconds()
	r := rate{byClient: map[string]float64{}}
	for k, n := range c.auditCount(a, b, isWrite) {
		r.byClient[k] = float64(n) / secs
		r.total += float64(n) / secs
	}
	return r
}

// isWrite reports whether an audit event's verb changes an object.
func isWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// clientOf names the program behind a user agent (client-go puts the
// binary's name first).
func clientOf(ua string) string {
	name, _, _ := strings.Cut(ua, "/")
	switch {
	case strings.HasPrefix(name, "crossplane"):
		return "crossplane"
	case strings.HasPrefix(name, "provider-kubernetes"):
		return "provider-kubernetes"
	case strings.HasPrefix(name, "kube-controller-manager"):
		return "kube-controller-manager"
	case strings.HasPrefix(name, "kube-apiserver"):
		return "kube-apiserver"
	}
	return "suite"
}

// measureRest counts requests, and the CPU time of every process, over
// restWindow while nothing changes.
func (sc *scenarios) measureRest(t *testing.T) (rate, cpuUse) {
	t.Helper()
	a, err := sc.c.countRequests(sc.ctx)
	must(t, err)
	cpu, xp := sc.c.ps.cpu(), sc.c.modelRouteReconciles(sc.ctx)
	select {
	case <-time.After(restWindow):
	case <-sc.ctx.Done():
		t.Fatal(sc.ctx.Err())
	}
	b, err := sc.c.countRequests(sc.ctx)
	must(t, err)
	t.Logf("Crossplane at rest: %s", sc.c.modelRouteReconciles(sc.ctx).since(xp))
	return sc.c.rateBetween(a, b), sc.c.ps.cpu().since(cpu)
}

// firstAfter returns the first transition to status at or after since.
func firstAfter(ts []transition, since time.Time, status string) (time.Time, bool) {
	for _, tr := range ts {
		if !tr.at.Before(since) && tr.status == status {
			return tr.at, true
		}
	}
	return time.Time{}, false
}

// lastStatusBefore returns the last status recorded before at, or "".
func lastStatusBefore(ts []transition, at time.Time) string {
	st := ""
	for _, tr := range ts {
		if tr.at.Before(at) {
			st = tr.status
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
// opening the replay saw and the cooldown (breakersClosableAt), so that a
// route's back-off brings that first event.
func (sc *scenarios) restPastBreakers(t *testing.T) (rate, time.Time, cpuUse) {
	t.Helper()
	quiet := sc.w.breakersClosableAt(time.Now()).Add(30 * time.Second)
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
