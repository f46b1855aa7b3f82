// Package sim checks the function's safety claims on a model of the actors
// that decide readiness: the Kubernetes Deployment controller, evictions
// under a PDB, Envoy Gateway, AI Gateway's controller and pod webhook,
// provider-kubernetes and Crossplane. Crossplane calls this project's real
// RunFunction; nothing of its logic is copied here.
//
// The actors follow the upstream behaviour described in comments beside
// each one. Every step picks one enabled actor at random, so each seed is
// one interleaving; the tests run many seeds per scenario.
package sim

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
)

const (
	gwNS      = "modelplane-system"
	gwName    = "inference-gateway"
	egNS      = "envoy-gateway-system"
	depName   = "envoy-modelplane-system-inference-gateway"
	hashKey   = "aigateway.envoyproxy.io/extproc-config-hash"
	uuidKey   = "aigateway.envoyproxy.io/uuid"
	replicas  = 2
	maxSurge  = 1 // RollingUpdate 25% of 2, rounded up
	maxUnavai = 0 // RollingUpdate 25% of 2, rounded down
	pdbMaxUn  = 1 // EnvoyProxy envoyPDB.maxUnavailable
)

// pod is one Envoy pod.
type pod struct {
	id       int
	template int // the template revision it was created from
	sidecar  bool
	ready    bool
}

// deployment is the Envoy Deployment and its pods.
type deployment struct {
	incarnation        int // bumps when Envoy Gateway recreates it
	generation         int64
	observedGeneration int64
	specReplicas       int
	template           int // template revision; bumps with every template change
	envoyVersion       int
	annotations        map[string]string
	pods               []*pod
	// status as the Deployment controller last wrote it
	stReplicas, stUpdated, stAvailable, stReady int
	stAvailableCond                             bool
}

// remoteObject is any other object on the gateway cluster.
type remoteObject struct {
	manifest map[string]any // apiVersion, kind, metadata, spec (or data)
	status   map[string]any
}

// world is the gateway cluster and the control plane.
type world struct {
	rng *rand.Rand
	cfg config

	// gateway cluster
	dep           *deployment // nil when there is none
	remote        map[string]*remoteObject
	filterSecret  bool // AI Gateway's filter-config Secret
	nextPod       int
	egVersion     int
	aigwHash      string
	aigwUUIDCount int

	// control plane
	objects   map[string]*cpObject // by xr/resource name
	gateway   *xr
	routes    map[string]*xr
	secrets   map[string]map[string]any // control-plane Secrets in the routes' namespace
	celByExpr map[string]celProgram

	// what happened, for invariants
	anchorCreated bool
	violations    []string
	deletions     []string
}

// config is one configuration of the model.
type config struct {
	rule    rule
	aigw11  bool // AI Gateway v1.1.0 (else v1.0.0)
	watchOn bool // provider-kubernetes runs with watches and the Object sets watch
}

// xr is a composite resource.
type xr struct {
	kind       string
	name       string
	spec       map[string]any
	status     map[string]any
	conditions map[string]condition
	deleted    bool
}

type condition struct {
	status bool
	reason string
}

func newWorld(seed uint64, cfg config) *world {
	return &world{
		rng:       rand.New(rand.NewPCG(seed, seed*7919+1)),
		cfg:       cfg,
		remote:    map[string]*remoteObject{},
		objects:   map[string]*cpObject{},
		routes:    map[string]*xr{},
		secrets:   map[string]map[string]any{},
		celByExpr: map[string]celProgram{},
		egVersion: 1,
		aigwHash:  "hash-1",
	}
}

func (w *world) violate(format string, a ...any) {
	w.violations = append(w.violations, fmt.Sprintf(format, a...))
}

func remoteKey(kind, ns, name string) string { return kind + "/" + ns + "/" + name }

// --- Kubernetes Deployment controller -------------------------------------

// newPods and oldPods split the pods by template revision.
func (d *deployment) split() (cur, old []*pod) {
	for _, p := range d.pods {
		if p.template == d.template {
			cur = append(cur, p)
		} else {
			old = append(old, p)
		}
	}
	return cur, old
}

func countReady(ps []*pod) int {
	n := 0
	for _, p := range ps {
		if p.ready {
			n++
		}
	}
	return n
}

// dcSync is one sync of the Deployment controller: it observes the
// generation, takes one rolling-update step (create a pod of the current
// template within maxSurge, or remove an old or excess pod while keeping
// spec.replicas - maxUnavailable available), and writes the counters as they
// are now. Pods it creates pass the AI Gateway webhook.
func (w *world) dcSync() {
	d := w.dep
	if d == nil {
		return
	}
	d.observedGeneration = d.generation
	cur, old := d.split()
	total := len(d.pods)
	switch {
	case len(cur) < d.specReplicas && total < d.specReplicas+maxSurge:
		w.createPod()
	case len(old) > 0:
		// Remove a not-ready old pod freely, a ready one only while
		// enough stay available.
		for _, p := range old {
			if !p.ready {
				w.removePod(p)
				goto status
			}
		}
		if countReady(d.pods)-1 >= d.specReplicas-maxUnavai {
			w.removePod(old[0])
		}
	case len(cur) > d.specReplicas:
		w.removePod(cur[len(cur)-1])
	}
status:
	cur, _ = d.split()
	d.stReplicas, d.stUpdated = len(d.pods), len(cur)
	d.stAvailable, d.stReady = countReady(d.pods), countReady(d.pods)
	// The Deployment's Available condition: at least spec.replicas -
	// maxUnavailable(strategy) available.
	d.stAvailableCond = d.stAvailable >= d.specReplicas-maxUnavai
}

// createPod creates a pod through AI Gateway's mutating webhook, which adds
// the ext-proc sidecar if and only if the gateway has an AIGatewayRoute and
// the filter-config Secret exists (ai-gateway internal/controller/
// gateway_mutator.go, mutatePod).
func (w *world) createPod() {
	w.nextPod++
	w.dep.pods = append(w.dep.pods, &pod{id: w.nextPod, template: w.dep.template, sidecar: w.effectiveRoute() && w.filterSecret})
}

func (w *world) removePod(p *pod) {
	w.dep.pods = slices.DeleteFunc(w.dep.pods, func(q *pod) bool { return q == p })
}

// kubelet makes one pending pod Ready.
func (w *world) kubelet() bool {
	if w.dep == nil {
		return false
	}
	for _, p := range w.dep.pods {
		if !p.ready {
			p.ready = true
			return true
		}
	}
	return false
}

// evict removes one ready pod if the PDB allows it: healthy pods must stay
// above spec.replicas - maxUnavailable.
func (w *world) evict() bool {
	if w.dep == nil {
		return false
	}
	if countReady(w.dep.pods) <= w.dep.specReplicas-pdbMaxUn {
		return false
	}
	for _, p := range w.dep.pods {
		if p.ready {
			w.removePod(p)
			return true
		}
	}
	return false
}

// --- Envoy Gateway ---------------------------------------------------------

// envoyGateway creates the Envoy Deployment under the pinned name once the
// Gateway and its EnvoyProxy exist, keeps its replicas and Envoy image, and
// gives the Gateway an address. Its template does not carry AI Gateway's
// annotations: they belong to another field manager and survive Envoy
// Gateway's server-side applies, but a recreated Deployment starts without
// them.
func (w *world) envoyGateway() {
	gw := w.remote[remoteKey("Gateway", gwNS, gwName)]
	ep := w.remote[remoteKey("EnvoyProxy", gwNS, gwName)]
	if gw == nil || ep == nil {
		return
	}
	if gw.status["addresses"] == nil {
		gw.status["addresses"] = []any{map[string]any{"type": "IPAddress", "value": "203.0.113.10"}}
	}
	if w.dep == nil {
		w.dep = &deployment{incarnation: 1, generation: 1, specReplicas: replicas, template: 1, envoyVersion: w.egVersion, annotations: map[string]string{}}
		return
	}
	if w.dep.envoyVersion != w.egVersion {
		w.dep.envoyVersion = w.egVersion
		w.templateChanged()
	}
}

func (w *world) templateChanged() {
	w.dep.generation++
	w.dep.template++
}

// recreateDeployment is Envoy Gateway replacing the Deployment: the old one
// and its pods go, a new one starts at generation 1 without AI Gateway's
// template annotations.
func (w *world) recreateDeployment() {
	if w.dep == nil {
		return
	}
	inc := w.dep.incarnation + 1
	w.dep = &deployment{incarnation: inc, generation: 1, specReplicas: replicas, template: 1, envoyVersion: w.egVersion, annotations: map[string]string{}}
}

// --- AI Gateway -----------------------------------------------------------

// effectiveRoute: any AIGatewayRoute attached to the Gateway counts,
// whatever it matches (ai-gateway v1.0.0 internal/controller/gateway.go,
// reconcileFilterConfigSecret).
func (w *world) effectiveRoute() bool {
	for k, o := range w.remote {
		if o.manifest["kind"] == "AIGatewayRoute" && k != "" {
			return true
		}
	}
	return false
}

// aiGatewayRoutes is AI Gateway's route controller: it accepts every
// AIGatewayRoute once it has generated its HTTPRoute. Acceptance says
// nothing about the sidecar (ai-gateway internal/controller/controller.go).
func (w *world) aiGatewayRoutes() {
	for _, o := range w.remote {
		if o.manifest["kind"] == "AIGatewayRoute" {
			o.status["conditions"] = []any{map[string]any{"type": "Accepted", "status": "True", "reason": "ReconciliationSucceeded"}}
		}
	}
}

// aiGateway is one reconcile of AI Gateway's gateway controller: it writes
// the filter-config Secret when the gateway has an effective route, does
// nothing while the Deployment is mid-rollout, and otherwise patches the pod
// template: v1.0.0 writes a new uuid only when the pods' sidecar state
// disagrees with the routes; v1.1.0 also writes extproc-config-hash
// whenever an effective route exists and the hash differs
// (internal/controller/gateway.go, annotateGatewayPods, at both tags).
func (w *world) aiGateway() {
	eff := w.effectiveRoute()
	if eff {
		w.filterSecret = true
	}
	d := w.dep
	if d == nil || len(d.pods) == 0 {
		return // requeue: no pods yet
	}
	if d.observedGeneration < d.generation || d.stReplicas > d.stUpdated {
		return // mid-rollout: requeue
	}
	all, none := true, true
	for _, p := range d.pods {
		all = all && p.sidecar
		none = none && !p.sidecar
	}
	changed := false
	if (eff && !all) || (!eff && !none) {
		w.aigwUUIDCount++
		d.annotations[uuidKey] = fmt.Sprintf("uuid-%d", w.aigwUUIDCount)
		changed = true
	}
	if w.cfg.aigw11 && eff && d.annotations[hashKey] != w.aigwHash {
		d.annotations[hashKey] = w.aigwHash
		changed = true
	}
	if changed {
		w.templateChanged()
	}
}

// deploymentManifest is the Deployment as the API server returns it, in
// JSON shape: zero counters are absent.
func (d *deployment) manifest() map[string]any {
	st := map[string]any{"observedGeneration": float64(d.observedGeneration)}
	for k, v := range map[string]int{"replicas": d.stReplicas, "updatedReplicas": d.stUpdated, "availableReplicas": d.stAvailable, "readyReplicas": d.stReady} {
		if v != 0 {
			st[k] = float64(v)
		}
	}
	if d.observedGeneration == 0 {
		delete(st, "observedGeneration")
	}
	avail := "False"
	if d.stAvailableCond {
		avail = "True"
	}
	st["conditions"] = []any{map[string]any{"type": "Available", "status": avail}}
	tmd := map[string]any{"labels": map[string]any{"app.kubernetes.io/name": "envoy"}}
	if len(d.annotations) > 0 {
		a := map[string]any{}
		for k, v := range d.annotations {
			a[k] = v
		}
		tmd["annotations"] = a
	}
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": depName, "namespace": egNS, "generation": float64(d.generation), "uid": fmt.Sprintf("dep-%d", d.incarnation)},
		"spec":     map[string]any{"replicas": float64(d.specReplicas), "template": map[string]any{"metadata": tmd}},
		"status":   st,
	}
}

// liveWithoutSidecar counts Ready pods, which take traffic, that lack the
// sidecar and so answer 500.
func (w *world) liveWithoutSidecar() int {
	if w.dep == nil {
		return 0
	}
	n := 0
	for _, p := range w.dep.pods {
		if p.ready && !p.sidecar {
			n++
		}
	}
	return n
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
