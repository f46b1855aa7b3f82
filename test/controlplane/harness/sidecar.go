package harness

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The seed's invariant, the property the whole product exists for: at
// every observation, whenever any ModelRoute says RoutingReady=True, every
// Ready Envoy pod of the gateway has AI Gateway's ext-proc sidecar in its
// spec. A pod without it answers every model request with a 500. The pods
// are the real API server's, their sidecars put there by AI Gateway's real
// webhook; only their readiness comes from the kubelet stand-in.
//
// An observation is any event of a watched resource: the invariant is
// checked on the latest state the watch showed of every ModelRoute and
// every Envoy pod. A RoutingReady=True counts as soon as the watch shows
// it, even one the judge holds back as a replay of Crossplane's
// (replay.go): a condition users can see is one users act on, and so
// a replay that later stands as the verdict was checked against every pod
// state of its whole window as it came. Only observations that could
// fail count (some ModelRoute True beside some Ready Envoy pod), and a run
// in which ModelRoutes were True but the count stayed zero did not check
// the invariant at all (SidecarUnexercised).
//
// A terminating pod does not count: the endpoints controllers take a pod
// out of service once it is terminating (and here, with no kubelet, the
// API server removes a deleted pod at once).

// Template annotations that mark an ext-proc rollout, written out here, not
// taken from the function, so that a wrong key there fails the suite:
// AI Gateway v1.0.0's uuid (ai-gateway v1.0.0
// internal/controller/ai_gateway_route.go, aigatewayUUIDAnnotationKey),
// v1.1.0's config hash, and the function's own marker for the case v1.0.0
// writes none.
const (
	AIGWUUID  = "aigateway.envoyproxy.io/uuid"
	aigwHash  = "aigateway.envoyproxy.io/extproc-config-hash"
	OwnMarker = "modelplane.ai/ext-proc-verified"
)

var templateMarkers = []string{AIGWUUID, aigwHash, OwnMarker}

// sidecarState is what the world keeps for the invariant.
type sidecarState struct {
	pods         map[string]*corev1.Pod // the gateway's live Envoy pods, by name
	routingReady map[string]bool        // RoutingReady=True as last seen, by ModelRoute
	replayedTrue map[string]bool        // of those, the ones the judge holds back as replays
	everTrue     bool                   // some ModelRoute was seen RoutingReady=True
	observations int                    // observations that could have failed
	violations   int
	reported     map[string]bool // pod and route pairs already reported

	created []podCreated // every Envoy pod of the gateway, as created
	markers []MarkerChange
}

// podCreated is one Envoy pod as the API server admitted it, after AI
// Gateway's webhook.
type podCreated struct {
	at         time.Time
	replicaSet string
	sidecar    bool
}

// MarkerChange is one change of the Envoy Deployment's template: its
// markers, or its generation.
type MarkerChange struct {
	At         time.Time // when the watch saw it
	UID        string    // the Deployment's uid: a re-created Deployment starts over
	generation int64
	Values     map[string]string // the template's markers, by annotation
}

// String is the change as the log prints it.
func (m MarkerChange) String() string {
	return fmt.Sprintf("%s Deployment %s generation %d markers %v", m.At.Format("15:04:05.000"), m.UID[:8], m.generation, m.Values)
}

// envoyPodOfGateway reports whether u is an Envoy pod of the suite's
// gateway.
func envoyPodOfGateway(u *unstructured.Unstructured) bool {
	l := u.GetLabels()
	return u.GetNamespace() == EnvoyGatewayNS && l[LabelOwningGatewayName] == GatewayXRName && l[labelOwningGatewayNamespace] == GatewayNS
}

// onPod records a pod's latest state and checks the invariant.
func (w *World) onPod(u *unstructured.Unstructured, deleted bool) {
	if !envoyPodOfGateway(u) {
		return
	}
	p := &corev1.Pod{}
	if err := FromUnstructured(u, p); err != nil {
		w.violate("cannot read Envoy pod %s: %v", u.GetName(), err)
		return
	}
	w.Mu.Lock()
	defer w.Mu.Unlock()
	s := &w.sidecar
	if _, seen := s.pods[p.Name]; !seen && !deleted && p.DeletionTimestamp == nil {
		s.created = append(s.created, podCreated{at: time.Now(), replicaSet: ownerReplicaSet(p), sidecar: Sidecar(p) != nil})
	}
	if deleted || p.DeletionTimestamp != nil {
		delete(s.pods, p.Name)
	} else {
		s.pods[p.Name] = p
	}
	w.checkSidecarLocked()
}

// ownerReplicaSet is the uid of the pod's ReplicaSet: a re-created
// Deployment's ReplicaSet may have the old one's name, never its uid.
func ownerReplicaSet(p *corev1.Pod) string {
	for _, o := range p.OwnerReferences {
		if o.Kind == "ReplicaSet" {
			return string(o.UID)
		}
	}
	return ""
}

// checkSidecarLocked checks the invariant on the state as it is now, and
// counts the observation if it could have failed: some ModelRoute
// RoutingReady=True beside some Ready Envoy pod.
func (w *World) checkSidecarLocked() {
	s := &w.sidecar
	var ready []string
	for r, ok := range s.routingReady {
		if ok {
			ready = append(ready, r)
		}
	}
	if len(ready) == 0 {
		return
	}
	sort.Strings(ready)
	names := make([]string, 0, len(s.pods))
	for name, p := range s.pods {
		if podReady(p) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return
	}
	sort.Strings(names)
	s.observations++
	for _, name := range names {
		if Sidecar(s.pods[name]) != nil {
			continue
		}
		key := name + " " + strings.Join(ready, ",")
		s.violations++
		if s.reported[key] {
			continue
		}
		s.reported[key] = true
		routes := make([]string, len(ready))
		for i, r := range ready {
			routes[i] = r
			if s.replayedTrue[r] {
				routes[i] += " (as Crossplane replayed it from its cache)"
			}
		}
		w.Violations = append(w.Violations, time.Now().Format("15:04:05.000")+" "+
			fmt.Sprintf("sidecar invariant: RoutingReady=True on %s while Envoy pod %s is Ready without the %s sidecar", strings.Join(routes, ", "), name, sidecarName))
	}
}

// onDeploymentMarkers records a change of the Envoy Deployment's template
// markers.
func (w *World) onDeploymentMarkers(u *unstructured.Unstructured, now time.Time) {
	vals := map[string]string{}
	for _, k := range templateMarkers {
		if v, _, _ := unstructured.NestedString(u.Object, "spec", "template", "metadata", "annotations", k); v != "" {
			vals[k] = v
		}
	}
	w.Mu.Lock()
	defer w.Mu.Unlock()
	if ms := w.sidecar.markers; len(ms) > 0 && ms[len(ms)-1].UID == string(u.GetUID()) &&
		ms[len(ms)-1].generation == u.GetGeneration() && fmt.Sprint(ms[len(ms)-1].Values) == fmt.Sprint(vals) {
		return
	}
	w.sidecar.markers = append(w.sidecar.markers, MarkerChange{At: now, UID: string(u.GetUID()), generation: u.GetGeneration(), Values: vals})
}

// MarkerChanges returns the template marker changes seen so far.
func (w *World) MarkerChanges() []MarkerChange {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	return append([]MarkerChange(nil), w.sidecar.markers...)
}

// SidecarSummary is the line the suite prints at its end: the
// observations that could have failed, and the violations.
func (w *World) SidecarSummary() (observations, violations int) {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	return w.sidecar.observations, w.sidecar.violations
}

// SidecarUnexercised returns why the invariant checked nothing, or "": a
// ModelRoute was RoutingReady=True, but never beside a Ready Envoy pod.
func (w *World) SidecarUnexercised() string {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	if w.sidecar.everTrue && w.sidecar.observations == 0 {
		return "a ModelRoute said RoutingReady=True, but never while an Envoy pod of the gateway was Ready: the sidecar invariant was never exercised"
	}
	return ""
}

// PodsCreated returns the Envoy pods created since from, grouped by
// ReplicaSet in the order each first appeared: how many of each had the
// sidecar at creation.
func (w *World) PodsCreated(from time.Time) []ReplicaSetPods {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	var out []ReplicaSetPods
	idx := map[string]int{}
	for _, p := range w.sidecar.created {
		if p.at.Before(from) {
			continue
		}
		i, ok := idx[p.replicaSet]
		if !ok {
			i = len(out)
			idx[p.replicaSet] = i
			out = append(out, ReplicaSetPods{uid: p.replicaSet, First: p.at})
		}
		out[i].Pods++
		if p.sidecar {
			out[i].WithSidecar++
		}
	}
	return out
}

// ReplicaSetPods counts one ReplicaSet's pods.
type ReplicaSetPods struct {
	uid               string
	First             time.Time // when its first pod was created
	Pods, WithSidecar int       // its pods created, and those of them with the ext-proc sidecar
}

// String is the count as the log prints it.
func (r ReplicaSetPods) String() string {
	return fmt.Sprintf("ReplicaSet %s: %d of %d pods had the sidecar at creation", r.uid[:8], r.WithSidecar, r.Pods)
}
