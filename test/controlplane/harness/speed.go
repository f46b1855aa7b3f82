package harness

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

// timelineEnv names the file the timelines go to.
const timelineEnv = "CONTROLPLANE_TIMELINE"

// Speeds collects what the scenarios measured.
type Speeds struct {
	mu sync.Mutex
	by map[string]map[string]float64
}

// Record notes one value of a scenario.
func (s *Speeds) Record(scenario, event string, v float64) {
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

// Write puts the timelines into the file CONTROLPLANE_TIMELINE names, if
// any, and logs them.
func (s *Speeds) Write(t *testing.T) {
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

// Requests is the API server's count of requests so far, as its
// apiserver_request_total says, and when it was read. The audit log
// splits a window of them by client (auditClients).
type Requests struct {
	At    time.Time // when the counter was read
	total float64
}

// CountRequests reads the API server's request counter.
func (c *Cluster) CountRequests(ctx context.Context) (Requests, error) {
	r := Requests{At: time.Now()}
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

// Rate is requests per second between two counts, in all and for each
// client the audit log names in that window.
type Rate struct {
	Total    float64            // requests per second in all
	ByClient map[string]float64 // requests per second by client
}

// String is the rate as the log prints it.
func (r Rate) String() string {
	keys := make([]string, 0, len(r.ByClient))
	for k := range r.ByClient {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.1f", k, r.ByClient[k])
	}
	return fmt.Sprintf("%.1f/s (%s)", r.Total, strings.Join(parts, ", "))
}

// RateBetween is the request rate from a to b.
func (c *Cluster) RateBetween(a, b Requests) Rate {
	secs := b.At.Sub(a.At).Seconds()
	r := Rate{Total: (b.total - a.total) / secs, ByClient: map[string]float64{}}
	for k, n := range c.auditClients(a.At, b.At) {
		r.ByClient[k] = float64(n) / secs
	}
	return r
}

// auditClients counts the requests the audit log recorded between from and
// to, by client: Crossplane, provider-kubernetes, kube-controller-manager,
// and the suite itself (its stand-ins and observers).
func (c *Cluster) auditClients(from, to time.Time) map[string]int {
	return c.auditCount(from, to, func(string) bool { return true })
}

// auditCount counts the requests the audit log recorded between from and
// to whose verb matches, by client.
func (c *Cluster) auditCount(from, to time.Time, match func(verb string) bool) map[string]int {
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

// WritesBetween is the rate of writes (create, update, patch, delete)
// the audit log recorded from a to b, in all and by client.
func (c *Cluster) WritesBetween(a, b time.Time) Rate {
	secs := b.Sub(a).Seconds()
	r := Rate{ByClient: map[string]float64{}}
	for k, n := range c.auditCount(a, b, isWrite) {
		r.ByClient[k] = float64(n) / secs
		r.Total += float64(n) / secs
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
