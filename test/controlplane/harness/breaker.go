package harness

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Crossplane's circuit breaker of a composite, replayed over the events the
// suite sees, so that a scenario can say what spent a ModelRoute's tokens
// and when its breaker opened. The constants are crossplane v2.3.0's and
// v2.2.0's defaults (cmd/crossplane/core/core.go, CircuitBreakerBurst and
// CircuitBreakerRefillRate; internal/circuit/token_bucket.go), which the
// suite runs with.
const (
	breakerCapacity = 100.0
	breakerRefill   = 1.0 // tokens per second
	breakerCooldown = 5 * time.Minute
)

// spend is one event that cost a composite tokens: an update of one of its
// composed resources, or of the composite itself.
type spend struct {
	at     time.Time
	source string // the composition resource name, or "(composite)"
	tokens int
	detail string // what the object looked like, for the log
}

// recordSpend notes what an Object or ModelRoute event cost its ModelRoute.
// Crossplane maps every event of a composed resource, and of the composite
// itself, to the composite through the breaker; controller-runtime calls
// the map function for both the old and the new object of an update
// (sigs.k8s.io/controller-runtime pkg/handler/enqueue_mapped.go, Update),
// so an update costs two tokens and a create one. The suite's informer
// sees the same events as Crossplane's cache. A ModelRoute's key is its
// namespace/name; an InferenceGateway's, whose Objects are in ObjectNS,
// is gatewayBreakerKey(name).
func (w *World) recordSpend(kind string, u *unstructured.Unstructured, now time.Time) {
	var key, source string
	switch kind {
	case "Object":
		comp := u.GetLabels()[LabelComposite]
		switch {
		case comp == "":
			return
		case u.GetNamespace() == ObjectNS:
			key = gatewayBreakerKey(comp)
		default:
			key = u.GetNamespace() + "/" + comp
		}
		source = u.GetAnnotations()[AnnotationResourceName]
	case "ModelRoute":
		key, source = u.GetNamespace()+"/"+u.GetName(), "(composite)"
	case "InferenceGateway":
		key, source = gatewayBreakerKey(u.GetName()), "(composite)"
	default:
		return
	}
	if u.GetDeletionTimestamp() != nil {
		// Crossplane lets these through without counting them
		// (internal/circuit/mapfunc.go, NewMapFunc).
		return
	}
	w.Mu.Lock()
	defer w.Mu.Unlock()
	if w.spends == nil {
		w.spends, w.spendSeen = map[string][]spend{}, map[types.UID]bool{}
	}
	tokens := 2
	if !w.spendSeen[u.GetUID()] {
		w.spendSeen[u.GetUID()], tokens = true, 1
	}
	refs, _, _ := unstructured.NestedSlice(u.Object, "spec", "references")
	_, manifest, _ := unstructured.NestedMap(u.Object, "status", "atProvider", "manifest")
	detail := fmt.Sprintf("rv %s gen %d/%d finalizers %d refs %d Synced=%s Ready=%s manifest %v", u.GetResourceVersion(), u.GetGeneration(),
		Int64At(u.Object, "status", "observedGeneration"), len(u.GetFinalizers()), len(refs), ConditionStatus(u, "Synced"), ConditionStatus(u, "Ready"), manifest)
	w.spends[key] = append(w.spends[key], spend{at: now, source: source, tokens: tokens, detail: detail})
}

// BreakerReport is what the replayed breaker of one composite did between
// two times.
type BreakerReport struct {
	Spent    int // tokens the composite's events cost
	bySource map[string]int
	// Opened lists when the breaker opened, and what the last events
	// before it were.
	Opened []string
	// OpenAt reports whether the breaker was open at the end.
	OpenAt bool
	// lastOpened is when the breaker last opened up to the end, before
	// from too; the zero time if it never did.
	lastOpened time.Time
}

// ReplayBreaker runs Crossplane's token bucket over every event of the
// composite key since the suite began, and reports what happened between
// from and to.
func (w *World) ReplayBreaker(key string, from, to time.Time) BreakerReport {
	w.Mu.Lock()
	ss := slices.Clone(w.spends[key])
	w.Mu.Unlock()
	r := BreakerReport{bySource: map[string]int{}}
	tokens, last := breakerCapacity, time.Time{}
	open, openedAt := false, time.Time{}
	for i, s := range ss {
		if s.at.After(to) {
			break
		}
		if !last.IsZero() {
			tokens = min(breakerCapacity, tokens+breakerRefill*s.at.Sub(last).Seconds())
		}
		last = s.at
		in := !s.at.Before(from)
		if in {
			r.Spent += s.tokens
			r.bySource[s.source] += s.tokens
		}
		if open && s.at.Sub(openedAt) >= breakerCooldown {
			open = false
		}
		if open {
			continue
		}
		for range s.tokens {
			if tokens >= 1 {
				tokens--
				continue
			}
			open, openedAt, r.lastOpened = true, s.at, s.at
			if in {
				r.Opened = append(r.Opened, fmt.Sprintf("%s at +%.1fs after %s", key, s.at.Sub(from).Seconds(), recentSources(ss[:i+1])))
			}
			break
		}
	}
	r.OpenAt = open && to.Sub(openedAt) < breakerCooldown
	return r
}

// gatewayBreakerKey is the key of an InferenceGateway's replayed breaker.
func gatewayBreakerKey(name string) string { return "InferenceGateway/" + name }

// BreakersClosableAt returns when the last breaker the replay saw open
// by now may close: its last opening and the cooldown. Crossplane closes
// a breaker at the first event after that (internal/circuit/
// token_bucket.go, RecordEvent), which then passes. The zero time when no
// breaker ever opened.
func (w *World) BreakersClosableAt(now time.Time) time.Time {
	w.Mu.Lock()
	keys := slices.Collect(maps.Keys(w.spends))
	w.Mu.Unlock()
	var last time.Time
	for _, k := range keys {
		if at := w.ReplayBreaker(k, now, now).lastOpened; at.After(last) {
			last = at
		}
	}
	if last.IsZero() {
		return last
	}
	return last.Add(breakerCooldown)
}

// recentSources names the sources of the last 16 events, as Crossplane's
// breaker remembers them to say what triggered it.
func recentSources(ss []spend) string {
	n := map[string]int{}
	for _, s := range ss[max(0, len(ss)-16):] {
		n[s.source]++
	}
	parts := make([]string, 0, len(n))
	for _, k := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%s×%d", k, n[k]))
	}
	return strings.Join(parts, " ")
}

// String renders the report: tokens spent, the top sources, and openings.
func (r BreakerReport) String() string {
	srcs := slices.SortedFunc(maps.Keys(r.bySource), func(a, b string) int { return r.bySource[b] - r.bySource[a] })
	var top []string
	for _, s := range srcs[:min(5, len(srcs))] {
		top = append(top, fmt.Sprintf("%s %d", s, r.bySource[s]))
	}
	out := fmt.Sprintf("%d tokens (%s)", r.Spent, strings.Join(top, ", "))
	if len(r.Opened) > 0 {
		out += "; breaker opened: " + strings.Join(r.Opened, "; ")
	}
	return out
}

// SpendsBetween renders the events that cost the composite key tokens
// between from and to, with their times since from.
func (w *World) SpendsBetween(key string, from, to time.Time) string {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	var sb strings.Builder
	for _, s := range w.spends[key] {
		if !s.at.Before(from) && !s.at.After(to) {
			fmt.Fprintf(&sb, "  %7.2fs  %s (%s)\n", s.at.Sub(from).Seconds(), s.source, s.detail)
		}
	}
	return sb.String()
}

// ReconcileStats is what Crossplane's controller-runtime metrics say of the
// ModelRoute controller so far: reconciles, and the seconds they and their
// wait in the work queue took in all, and reconciles by how they ended
// (controller_runtime_reconcile_total's result: error; requeue, which
// Crossplane returns on a conflict; requeue_after, a result with a TTL;
// success: controller-runtime v0.23 pkg/internal/controller/controller.go,
// reconcileHandler). The result says nothing of what started a reconcile.
type ReconcileStats struct {
	reconciles, reconcileSecs, queued, queueSecs float64
	byResult                                     map[string]float64
}

// ModelRouteReconciles reads Crossplane's /metrics for the ModelRoute
// controller (its name holds the XRD's plural, modelroutes).
func (c *Cluster) ModelRouteReconciles(ctx context.Context) ReconcileStats {
	st := ReconcileStats{byResult: map[string]float64{}}
	body, err := httpGet(ctx, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/metrics", c.xpMetrics), "")
	if err != nil {
		c.tb.Logf("cannot read Crossplane's metrics: %v", err)
		return st
	}
	for l := range strings.SplitSeq(body, "\n") {
		if !strings.Contains(l, "modelroutes") {
			continue
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(l, "controller_runtime_reconcile_time_seconds_count{"):
			st.reconciles += v
		case strings.HasPrefix(l, "controller_runtime_reconcile_time_seconds_sum{"):
			st.reconcileSecs += v
		case strings.HasPrefix(l, "workqueue_queue_duration_seconds_count{"):
			st.queued += v
		case strings.HasPrefix(l, "workqueue_queue_duration_seconds_sum{"):
			st.queueSecs += v
		case strings.HasPrefix(l, "controller_runtime_reconcile_total{"):
			if _, rest, ok := strings.Cut(l, `result="`); ok {
				result, _, _ := strings.Cut(rest, `"`)
				st.byResult[result] += v
			}
		}
	}
	return st
}

// Since renders the ModelRoute controller's work between two reads.
func (st ReconcileStats) Since(before ReconcileStats) string {
	n, q := st.reconciles-before.reconciles, st.queued-before.queued
	if n <= 0 || q <= 0 {
		return "no ModelRoute reconciles"
	}
	results := make([]string, 0, len(st.byResult))
	for _, r := range slices.Sorted(maps.Keys(st.byResult)) {
		if d := st.byResult[r] - before.byResult[r]; d > 0 {
			results = append(results, fmt.Sprintf("%s %.0f", r, d))
		}
	}
	return fmt.Sprintf("%.0f ModelRoute reconciles (%s), %.2fs each on average, after %.2fs in the work queue on average",
		n, strings.Join(results, ", "), (st.reconcileSecs-before.reconcileSecs)/n, (st.queueSecs-before.queueSecs)/q)
}

// FunctionCalls returns the function's log lines of its calls for the
// ModelRoute name: when Crossplane called it for that route.
func (c *Cluster) FunctionCalls(name string, last int) string {
	b, err := os.ReadFile(filepath.Join(c.Procs.LogDir, "function.log"))
	if err != nil {
		return err.Error()
	}
	var out []string
	for l := range strings.SplitSeq(string(b), "\n") {
		if strings.Contains(l, "Composed") && strings.Contains(l, `"`+name+`"`) {
			out = append(out, l)
		}
	}
	return strings.Join(out[max(0, len(out)-last):], "\n")
}
