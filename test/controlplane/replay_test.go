package controlplane

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Crossplane re-applies an XR's conditions as its informer cache holds
// them. Each reconcile writes the XR's status twice: first it server-side
// applies the function's desired status together with the conditions of
// the XR it read at the start of the reconcile ("include any pending
// conditions so we don't lose them"), then it updates the conditions the
// function returned (crossplane v2.2.0 internal/controller/apiextensions/
// composite/composition_functions.go, FunctionComposer.Compose, and
// reconciler.go, Reconcile). When a reconcile starts before the cache has
// the previous reconcile's update, which is usual when an event arrived
// while that reconcile ran (the work queue runs the key again at once), its
// apply writes the conditions of one reconcile ago back, and its update
// puts the function's verdict back a moment later. Each such pair is two
// more watch events, so the next reconcile starts as early, and the
// replays can chain until the cache wins the race or the XR's circuit
// breaker opens: crossplane/crossplane issue 7062, open on main as of
// 2026-12; its one proposed fix (pull request 7159, closed unmerged) only
// kept observedGeneration from changing.
//
// A replay is not the function's verdict, and no composition function can
// keep Crossplane from writing it. The world tells one apart by who wrote
// it: the API server records, per field, the last manager that changed it
// (managedFields), and only the apply carries conditions read from the
// cache; the function's conditions arrive with Crossplane's update. It
// judges so a ModelRoute's RoutingReady; the InferenceGateway's
// GatewayReady is recorded whole (onGateway says why).

// xrStatusApplier is the field manager of Crossplane's server-side apply of
// an XR's status (crossplane v2.2.0 composite/composition_functions.go,
// FieldOwnerXR).
const xrStatusApplier = "apiextensions.crossplane.io/composite"

// replayGrace is how long a condition Crossplane's apply wrote may stand
// before the world takes it for the function's verdict. A replay lasts
// from the apply to the update of one reconcile, milliseconds; a verdict
// that happens to equal what was replayed leaves the apply as the field's
// last writer (Crossplane's update changes nothing), and is recorded once
// it has stood this long, at the time it first appeared.
const replayGrace = 5 * time.Second

// replay is one condition Crossplane's apply wrote back.
type replay struct {
	at             time.Time
	xr, condType   string
	status, reason string
	// over is how long it stood: until the function's verdict was back,
	// or until it was taken for the verdict itself (stood).
	over  time.Duration
	stood bool
}

// pendingReplay is a replayed condition the world has not judged yet.
type pendingReplay struct {
	tr    transition
	index int // into world.replays
}

// appliedOnly reports whether field (status, reason) of u's condition of
// type condType was last changed by Crossplane's status apply: the applier
// is its only owner. An update that changes a field takes it from every
// other manager, and an apply of an unchanged value shares it, so a field
// only the applier owns was changed by the apply.
func appliedOnly(u *unstructured.Unstructured, condType, field string) bool {
	if u == nil {
		return false
	}
	key := `k:{"type":"` + condType + `"}`
	var owners []string
	for _, mf := range u.GetManagedFields() {
		if mf.Subresource != "status" || mf.FieldsV1 == nil {
			continue
		}
		var f map[string]map[string]map[string]map[string]any
		if json.Unmarshal(mf.FieldsV1.GetRawBytes(), &f) != nil {
			continue
		}
		if _, ok := f["f:status"]["f:conditions"][key]["f:"+field]; ok {
			owners = append(owners, mf.Manager+"/"+string(mf.Operation))
		}
	}
	return len(owners) == 1 && owners[0] == xrStatusApplier+"/"+string(metav1.ManagedFieldsOperationApply)
}

// judgeLocked judges one observation of an XR's condition: cur, as the
// watch saw it on u, against last, the latest recorded for the XR (nil
// for none). It returns true when cur is the function's verdict: the same
// as last, or a change Crossplane's update wrote (record it), or a replay
// that has stood for replayGrace (record it, at its first sighting, which
// it sets in cur). While a replay pends, it returns false: the caller
// records nothing and checks nothing on it.
func (w *world) judgeLocked(key, condType string, last *transition, cur *transition, u *unstructured.Unstructured, now time.Time) (verdict, record bool) {
	if cur.status == "" {
		return true, false
	}
	p := w.pending[key]
	if last != nil && last.status == cur.status && last.reason == cur.reason {
		if p != nil {
			w.replays[p.index].over = now.Sub(p.tr.at)
			delete(w.pending, key)
		}
		return true, false
	}
	field := "reason"
	if last == nil || last.status != cur.status {
		field = "status"
	}
	if last == nil || !appliedOnly(u, condType, field) {
		if p != nil {
			w.replays[p.index].over = now.Sub(p.tr.at)
			delete(w.pending, key)
		}
		return true, true
	}
	if p == nil || p.tr.status != cur.status || p.tr.reason != cur.reason {
		if p != nil {
			w.replays[p.index].over = now.Sub(p.tr.at)
		}
		w.pending[key] = &pendingReplay{tr: *cur, index: len(w.replays)}
		w.replays = append(w.replays, replay{at: cur.at, xr: key, condType: condType, status: cur.status, reason: cur.reason})
		return false, false
	}
	if now.Sub(p.tr.at) < replayGrace {
		return false, false
	}
	w.stoodLocked(key, p, now)
	*cur = p.tr
	return true, true
}

// stoodLocked marks a pending replay as taken for the verdict.
func (w *world) stoodLocked(key string, p *pendingReplay, now time.Time) {
	r := &w.replays[p.index]
	r.over, r.stood = now.Sub(p.tr.at), true
	delete(w.pending, key)
}

// promoteLocked records every pending replay that has stood for
// replayGrace: no event came since, so it is still the XR's condition.
func (w *world) promoteLocked(now time.Time) {
	for key, p := range w.pending {
		if now.Sub(p.tr.at) < replayGrace {
			continue
		}
		w.stoodLocked(key, p, now)
		w.byRoute[key] = append(w.byRoute[key], p.tr)
		w.sidecar.routingReady[key] = p.tr.status == "True"
	}
}

// replaysSeen returns the replays recorded so far.
func (w *world) replaysSeen() []replay {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.promoteLocked(time.Now())
	out := make([]replay, len(w.replays))
	copy(out, w.replays)
	return out
}

// replaySummary renders the replays: how many, of which XRs and
// conditions, how long they stood, and the ones that stood.
func replaySummary(rs []replay) string {
	if len(rs) == 0 {
		return "none"
	}
	byXR := map[string]int{}
	var longest time.Duration
	var stood []string
	for _, r := range rs {
		byXR[r.xr+" "+r.condType]++
		longest = max(longest, r.over)
		if r.stood {
			stood = append(stood, fmt.Sprintf("%s %s %s=%s (%s)", r.at.Format("15:04:05.000"), r.xr, r.condType, r.status, r.reason))
		}
	}
	keys := make([]string, 0, len(byXR))
	for k := range byXR {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, byXR[k])
	}
	s := fmt.Sprintf("%d (%s); the longest stood %s", len(rs), strings.Join(parts, ", "), longest.Round(time.Millisecond))
	if len(stood) > 0 {
		s += fmt.Sprintf("; %d stood %s and were taken for the function's verdict: %s", len(stood), replayGrace, strings.Join(stood, "; "))
	}
	return s
}
