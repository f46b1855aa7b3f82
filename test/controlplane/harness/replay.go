package harness

import (
	"context"
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Crossplane re-applies an XR's conditions as its informer cache holds
// them. Each reconcile writes the XR's status twice: first it server-side
// applies the function's desired status together with the conditions of
// the XR it read at the start of the reconcile ("include any pending
// conditions so we don't lose them"), then it updates the conditions the
// function returned (crossplane v2.3.0 and v2.2.0 internal/controller/
// apiextensions/composite/composition_functions.go, FunctionComposer.Compose,
// and reconciler.go, Reconcile; v2.3.0 skips that update when the status is
// unchanged). When a reconcile starts before the cache has
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
// it: the API server records, per field, the managers that own it
// (managedFields), and only the apply carries conditions read from the
// cache; the function's conditions arrive with Crossplane's update. It
// judges so a ModelRoute's RoutingReady; the InferenceGateway's
// GatewayReady is recorded whole (onGateway says why). The sidecar
// invariant does not wait for the judge: it checks every state the watch
// shows, replays included (sidecar.go).

// xrStatusApplier is the field manager of Crossplane's server-side apply of
// an XR's status (crossplane v2.3.0 and v2.2.0 composite/
// composition_functions.go, FieldOwnerXR).
const xrStatusApplier = "apiextensions.crossplane.io/composite"

// conditionFields are the fields of a condition a verdict is made of.
var conditionFields = []string{"status", "reason", "message", "lastTransitionTime"}

// ReplayBound is how long a replay can last: it lives from one reconcile's
// status apply to the same reconcile's status update, two requests one
// after the other in one worker, with nothing between them that waits on
// another controller. A condition that stands longer was not undone by its
// reconcile's update: the function said it again (a reconcile that starts
// from a stale cache hands the function stale inputs too, and the function
// computes the stale verdict again), or the update failed and the XR kept
// it until a later reconcile. Either way it stood as the XR's condition
// longer than any replay, so it is judged as the function's verdict, like
// any other from its first sighting on. The bound is that of
// the apply-to-update gap, not of a requeue: a grace as long as the
// function's TTL would let a wrong verdict that lasts until the next
// reconcile go unjudged.
const ReplayBound = time.Second

// Replay is one condition Crossplane's apply wrote back.
type Replay struct {
	At             time.Time // when the write-back was seen
	XR, CondType   string    // the XR (namespace/name) and the condition's type
	Status, Reason string    // the condition written back
	// Over is how long it stood: until the function's verdict was back,
	// until the XR was deleted, or until it was taken for the verdict
	// itself (stood).
	Over  time.Duration
	Stood bool // taken for the function's verdict: it stood past ReplayBound
}

// pendingReplay is a replayed condition the world has not judged yet.
type pendingReplay struct {
	tr    Transition
	index int // into world.replays
}

// Replayed reports whether u's condition of type CondType is as
// Crossplane's status apply last changed it, not as an update wrote it.
// Every apply applies every field of every condition: a field it changes
// becomes its own (it forces ownership), a field it leaves as it was it
// shares with the managers that own it. An update takes the fields it
// changes from every other manager and leaves the others as they were.
// So after an apply no other manager owns a field of the condition alone;
// after an update that changed the condition, the update owns the fields
// it changed alone, whatever the apply changed before (a verdict with the
// status a replay wrote and another reason leaves the status the apply's
// alone, and the reason the update's). The condition is a replay when the
// applier alone owns a field it changed and no other manager owns one
// alone; a condition whose fields are all shared is the one the last
// update wrote, applied again unchanged.
func Replayed(u *unstructured.Unstructured, condType string) bool {
	if u == nil {
		return false
	}
	key := `k:{"type":"` + condType + `"}`
	owners := map[string][]string{}
	for _, mf := range u.GetManagedFields() {
		if mf.Subresource != "status" || mf.FieldsV1 == nil {
			continue
		}
		var f map[string]map[string]map[string]map[string]any
		if json.Unmarshal(mf.FieldsV1.GetRawBytes(), &f) != nil {
			continue
		}
		for _, field := range conditionFields {
			if _, ok := f["f:status"]["f:conditions"][key]["f:"+field]; ok {
				owners[field] = append(owners[field], mf.Manager+"/"+string(mf.Operation))
			}
		}
	}
	applierAlone := false
	for _, field := range conditionFields {
		if ms := owners[field]; len(ms) == 1 {
			if ms[0] != xrStatusApplier+"/"+string(metav1.ManagedFieldsOperationApply) {
				return false
			}
			applierAlone = true
		}
	}
	return applierAlone
}

// judgeLocked judges one observation of an XR's condition, cur as the
// watch saw it on u at now, and records the XR's verdicts in
// w.byRoute[key]. A replay pending for the XR that has stood past
// ReplayBound is recorded first, at its first sighting: it was the
// verdict until now. Then cur is recorded if it is the function's
// verdict: a change from the last recorded one that Crossplane's update
// wrote. A change only the apply wrote pends: judgeLocked records nothing
// of it and returns true, until an observation or a reader of the
// transitions (promoteLocked) judges it.
func (w *World) judgeLocked(key, condType string, cur Transition, u *unstructured.Unstructured, now time.Time) (pending bool) {
	w.promoteLocked(now)
	p := w.pending[key]
	last := lastOf(w.byRoute[key])
	if cur.Status == "" || last != nil && last.Status == cur.Status && last.Reason == cur.Reason {
		w.endReplayLocked(key, now)
		return false
	}
	if last == nil || !Replayed(u, condType) {
		w.endReplayLocked(key, now)
		w.byRoute[key] = append(w.byRoute[key], cur)
		return false
	}
	if p != nil && p.tr.Status == cur.Status && p.tr.Reason == cur.Reason {
		return true
	}
	w.endReplayLocked(key, now)
	w.pending[key] = &pendingReplay{tr: cur, index: len(w.replays)}
	w.replays = append(w.replays, Replay{At: cur.At, XR: key, CondType: condType, Status: cur.Status, Reason: cur.Reason})
	return true
}

// endReplayLocked ends the replay pending for key, if any, within
// ReplayBound: the XR's condition changed, or the XR is gone.
func (w *World) endReplayLocked(key string, now time.Time) {
	if p := w.pending[key]; p != nil {
		w.replays[p.index].Over = now.Sub(p.tr.At)
		delete(w.pending, key)
	}
}

// promoteLocked records every pending replay that has stood past
// ReplayBound at now, at its first sighting: no observation ended it, so
// it has been the XR's condition all along, the function's verdict. Every
// reader of the recorded transitions calls it first.
func (w *World) promoteLocked(now time.Time) {
	for key, p := range w.pending {
		if now.Sub(p.tr.At) <= ReplayBound {
			continue
		}
		r := &w.replays[p.index]
		r.Over, r.Stood = now.Sub(p.tr.At), true
		delete(w.pending, key)
		w.byRoute[key] = append(w.byRoute[key], p.tr)
		delete(w.sidecar.replayedTrue, key)
		if key == TeamControlNS+"/"+RouteName && p.tr.Status == "True" {
			w.Timeline.Mark(TLRoutingReady, p.tr.At)
		}
	}
}

// routeDeletedLocked judges the replay pending for a ModelRoute the API
// server deleted at now: one that stood past ReplayBound was its verdict
// until then; one that did not was a replay. The route is no longer
// RoutingReady.
func (w *World) routeDeletedLocked(key string, now time.Time) {
	w.promoteLocked(now)
	w.endReplayLocked(key, now)
	delete(w.sidecar.routingReady, key)
	delete(w.sidecar.replayedTrue, key)
}

// replayWaitLocked is how long a check whose window ended at end must wait
// before every replay first seen by then is judged: until each has stood
// past ReplayBound, unless an observation ends it first. Zero when none
// pends.
func (w *World) replayWaitLocked(now, end time.Time) time.Duration {
	var wait time.Duration
	for _, p := range w.pending {
		if p.tr.At.After(end) {
			continue
		}
		if d := p.tr.At.Add(ReplayBound).Sub(now); d >= 0 {
			// Standing past the bound means longer than it.
			wait = max(wait, d+time.Millisecond)
		}
	}
	return wait
}

// AwaitReplays returns once every replay first seen by end is judged: a
// check of a window that ends at end calls it before it reads the
// transitions, so a replay still pending when the window closed is judged
// too, as a replay if its reconcile's update ends it within ReplayBound,
// and as a verdict in the window if not.
func (w *World) AwaitReplays(ctx context.Context, end time.Time) {
	for {
		w.Mu.Lock()
		now := time.Now()
		w.promoteLocked(now)
		d := w.replayWaitLocked(now, end)
		w.Mu.Unlock()
		if d == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

// ReplaysSeen returns the replays recorded so far.
func (w *World) ReplaysSeen() []Replay {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	w.promoteLocked(time.Now())
	out := make([]Replay, len(w.replays))
	copy(out, w.replays)
	return out
}
