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
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"
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
	uid      int // set at creation; a recreated object gets a new one
	owner    int // uid of its controller owner, 0 if none
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
	nextUID       int
	egVersion     int
	aigwHash      string
	aigwUUIDCount int

	// control plane
	objects   map[string]*cpObject // by xr/resource name
	gateway   *xr
	routes    map[string]*xr
	secrets   map[string]map[string]any // control-plane Secrets in the routes' namespace
	celByExpr map[string]celProgram
	// gatewayReconciles counts the function's reconciles of the gateway.
	gatewayReconciles int
	// reconciles counts every reconcile: the model's clock, one second
	// each, for the conditions' lastTransitionTime.
	reconciles int
	// gatewaySeen is the gateway as each of its reconciles left it, for
	// Crossplane's cache when it lags (config.lagging).
	gatewaySeen []map[string]any
	// heardOutage names the routes whose reconcile read their gateway as
	// not ready since its current outage began (invariant 9).
	heardOutage map[string]bool
	// resolving is the composite whose requirements are being resolved.
	resolving *xr

	// what happened, for invariants
	anchorCreated bool
	// resolvedRoutes holds the uids of the generated HTTPRoutes Envoy
	// Gateway has resolved every Backend of: they serve (invariant 8).
	resolvedRoutes map[int]bool
	violations     []string
	deletions      []string
}

// config is one configuration of the model.
type config struct {
	rule    rule
	aigw11  bool // AI Gateway v1.1.0 (else v1.0.0)
	watchOn bool // provider-kubernetes runs with watches and the Object sets watch
	// lagging: Crossplane's cache of the InferenceGateway, from which it
	// answers a ModelRoute's requirement, lags the API server (crossplane
	// v2.3.0 cmd/crossplane/core/core.go gives the required-resources
	// fetcher the cached client): one read in three returns the gateway as
	// one of its last five reconciles left it.
	lagging bool
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
	// since is its lastTransitionTime: Crossplane stamps a condition when
	// its status or reason changes and keeps the time otherwise.
	since time.Time
}

func newWorld(seed uint64, cfg config) *world {
	return &world{
		rng:            rand.New(rand.NewPCG(seed, seed*7919+1)),
		cfg:            cfg,
		remote:         map[string]*remoteObject{},
		objects:        map[string]*cpObject{},
		routes:         map[string]*xr{},
		heardOutage:    map[string]bool{},
		secrets:        map[string]map[string]any{},
		celByExpr:      map[string]celProgram{},
		resolvedRoutes: map[int]bool{},
		egVersion:      1,
		aigwHash:       "hash-1",
	}
}

func (w *world) violate(format string, a ...any) {
	w.violations = append(w.violations, fmt.Sprintf(format, a...))
}

func remoteKey(kind, ns, name string) string { return kind + "/" + ns + "/" + name }

// create puts a new object on the gateway cluster under a fresh uid.
func (w *world) create(key string, manifest map[string]any, owner int) *remoteObject {
	w.nextUID++
	r := &remoteObject{manifest: manifest, status: map[string]any{}, uid: w.nextUID, owner: owner}
	w.remote[key] = r
	return r
}

// garbageCollector is the Kubernetes garbage collector: it deletes an
// object whose controller owner is gone (or was recreated under a new
// uid), as it does the HTTPRoute AI Gateway generated for a deleted
// AIGatewayRoute (ai-gateway sets a controller reference on it).
func (w *world) garbageCollector() {
	live := map[int]bool{}
	for _, r := range w.remote {
		live[r.uid] = true
	}
	for _, k := range sortedKeys(w.remote) {
		if r := w.remote[k]; r.owner != 0 && !live[r.owner] {
			delete(w.remote, k)
		}
	}
}

// Small readers of the JSON-shaped manifests.
func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }
func list(v any) []any         { l, _ := v.([]any); return l }
func str(v any) string         { s, _ := v.(string); return s }

// metaOf returns a manifest's namespace and name.
func metaOf(m map[string]any) (string, string) {
	md := obj(m["metadata"])
	return str(md["namespace"]), str(md["name"])
}

// deepCopy copies a JSON-shaped value.
func deepCopy[T any](v T) T {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

// cond is a metav1.Condition as a controller writes it.
func cond(typ string, ok bool, reason, message string) map[string]any {
	return map[string]any{"type": typ, "status": titleBool(ok), "reason": reason, "message": message, "lastTransitionTime": "2026-01-01T00:00:00Z"}
}

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
	w.envoyGatewayPolicies()
	w.envoyGatewayRoutes()
	gw := w.remote[remoteKey("Gateway", gwNS, gwName)]
	ep := w.remote[remoteKey("EnvoyProxy", gwNS, gwName)]
	if gw == nil || ep == nil {
		return
	}
	if gw.status["addresses"] == nil {
		gw.status["addresses"] = []any{map[string]any{"type": "IPAddress", "value": "203.0.113.10"}}
	}
	// One status entry per listener of the spec, rebuilt on every pass;
	// the model's certificates are always valid, so each is Programmed
	// with its references resolved (gateway v1.8.3
	// internal/gatewayapi/contexts.go, ResetListeners;
	// internal/gatewayapi/validate.go, validateListenerConditions).
	var listeners []any
	ls, _ := obj(gw.manifest["spec"])["listeners"].([]any)
	for _, l := range ls {
		listeners = append(listeners, map[string]any{"name": obj(l)["name"], "conditions": []any{
			map[string]any{"type": "Programmed", "status": "True", "reason": "Programmed"},
			map[string]any{"type": "ResolvedRefs", "status": "True", "reason": "ResolvedRefs"},
		}})
	}
	gw.status["listeners"] = listeners
	if w.dep == nil {
		w.dep = &deployment{incarnation: 1, generation: 1, specReplicas: replicas, template: 1, envoyVersion: w.egVersion, annotations: map[string]string{}}
		return
	}
	if w.dep.envoyVersion != w.egVersion {
		w.dep.envoyVersion = w.egVersion
		w.templateChanged()
	}
}

// egController is the controllerName Envoy Gateway writes into statuses.
const egController = "gateway.envoyproxy.io/gatewayclass-controller"

// envoyGatewayPolicies writes a policy's ancestor status: Accepted=True
// for every Gateway it targets that exists; a Gateway that does not exist
// gets no ancestor entry (gateway v1.8.3 internal/gatewayapi/
// clienttrafficpolicy.go, resolveClientTrafficPolicyTargetRef: "Gateway not
// found" returns no gateway, and the policy is skipped for it). The status
// is rewritten from each translation.
func (w *world) envoyGatewayPolicies() {
	for _, r := range w.remote {
		switch r.manifest["kind"] {
		case "ClientTrafficPolicy", "BackendTrafficPolicy":
		default:
			continue
		}
		ns, _ := metaOf(r.manifest)
		var ancestors []any
		for _, t := range list(obj(r.manifest["spec"])["targetRefs"]) {
			tr := obj(t)
			name := str(tr["name"])
			if tr["kind"] != "Gateway" || w.remote[remoteKey("Gateway", ns, name)] == nil {
				continue
			}
			ancestors = append(ancestors, map[string]any{
				"ancestorRef":    map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": ns, "name": name},
				"controllerName": egController,
				"conditions":     []any{cond("Accepted", true, "Accepted", "Policy has been accepted.")},
			})
		}
		if ancestors == nil {
			delete(r.status, "ancestors")
		} else {
			r.status["ancestors"] = ancestors
		}
	}
}

// envoyGatewayRoutes writes an HTTPRoute's status.parents for each parent
// Gateway that exists, copying the parentRef as the route gives it:
// Accepted=True when the Gateway has the listener the sectionName names
// (or no sectionName is given), and ResolvedRefs=True when every
// backendRef names an existing Backend, else False with BackendNotFound
// (gateway-api apis/v1/shared_types.go, RouteConditionAccepted and
// RouteConditionResolvedRefs; gateway v1.8.3 internal/gatewayapi/route.go).
// A parent Gateway that does not exist is not Envoy Gateway's: it writes
// nothing for it.
func (w *world) envoyGatewayRoutes() {
	for _, r := range w.remote {
		if r.manifest["kind"] != "HTTPRoute" {
			continue
		}
		ns, _ := metaOf(r.manifest)
		spec := obj(r.manifest["spec"])
		resolved, missing := true, ""
		for _, rule := range list(spec["rules"]) {
			for _, b := range list(obj(rule)["backendRefs"]) {
				br := obj(b)
				bns := ns
				if n := str(br["namespace"]); n != "" {
					bns = n
				}
				if br["kind"] == "Backend" && w.remote[remoteKey("Backend", bns, str(br["name"]))] == nil {
					resolved, missing = false, bns+"/"+str(br["name"])
				}
			}
		}
		w.checkNoSplit(r, missing)
		var parents []any
		for _, p := range list(spec["parentRefs"]) {
			pr := obj(p)
			pns := ns
			if n := str(pr["namespace"]); n != "" {
				pns = n
			}
			gw := w.remote[remoteKey("Gateway", pns, str(pr["name"]))]
			if gw == nil {
				continue
			}
			accepted := pr["sectionName"] == nil
			for _, l := range list(obj(gw.manifest["spec"])["listeners"]) {
				accepted = accepted || obj(l)["name"] == pr["sectionName"]
			}
			acc := cond("Accepted", accepted, "Accepted", "Route is accepted")
			if !accepted {
				acc = cond("Accepted", false, "NoMatchingParent", "No listeners match this parent ref")
			}
			res := cond("ResolvedRefs", true, "ResolvedRefs", "Resolved all the Object references for the Route")
			if !resolved {
				res = cond("ResolvedRefs", false, "BackendNotFound", fmt.Sprintf("Backend %s not found", missing))
			}
			parents = append(parents, map[string]any{"parentRef": deepCopy(pr), "controllerName": egController, "conditions": []any{acc, res}})
		}
		if parents == nil {
			delete(r.status, "parents")
		} else {
			r.status["parents"] = parents
		}
	}
}

// checkNoSplit is invariant 8: Envoy Gateway never translates a generated
// HTTPRoute that serves (it has resolved every Backend before) while one
// of its Backends is missing and its ModelRoute exists. It would mark that
// destination invalid and route the model by weight over one cluster per
// backend, which AI Gateway leaves without priorities (gateway v1.8.3
// internal/ir/xds.go, HTTPRoute.NeedsClusterPerSetting; ai-gateway v1.0.0
// internal/extensionserver/post_translate_modify.go, maybeModifyCluster):
// the fallback tier takes live traffic.
func (w *world) checkNoSplit(r *remoteObject, missing string) {
	_, name := metaOf(r.manifest)
	if missing == "" {
		w.resolvedRoutes[r.uid] = true
		return
	}
	if x := w.routes[name]; x != nil && !x.deleted && w.resolvedRoutes[r.uid] {
		w.violate("invariant 8: Envoy Gateway translates the HTTPRoute %s, which served, without its Backend %s: a weighted split across its tiers", name, missing)
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

// aiGatewayRoutes is AI Gateway's route controller. For each
// AIGatewayRoute it builds the HTTPRoute of the same name and namespace,
// whose rules carry the backendRef of each named AIServiceBackend (failing
// if one is missing) and whose parentRefs are the route's, creates or
// updates it (keeping its status, which is Envoy Gateway's) under a
// controller reference, then needs every parent Gateway to exist; it sets
// Accepted=True when all of that succeeded, and otherwise NotAccepted
// (ai-gateway v1.0.0 internal/controller/ai_gateway_route.go,
// syncAIGatewayRoute, newHTTPRoute, syncGateways; controller.go,
// newConditions). Acceptance says nothing about the sidecar.
func (w *world) aiGatewayRoutes() {
	for _, k := range sortedKeys(w.remote) {
		r := w.remote[k]
		if r.manifest["kind"] != "AIGatewayRoute" {
			continue
		}
		c := cond("Accepted", true, "ReconciliationSucceeded", "AI Gateway Route reconciled successfully")
		if err := w.syncAIGatewayRoute(r); err != "" {
			c = cond("NotAccepted", false, "ReconciliationFailed", err)
		}
		r.status["conditions"] = []any{c}
	}
}

// syncAIGatewayRoute writes the generated HTTPRoute and reports what
// failed, if anything.
func (w *world) syncAIGatewayRoute(route *remoteObject) string {
	ns, name := metaOf(route.manifest)
	spec := obj(route.manifest["spec"])
	var rules []any
	for _, rl := range list(spec["rules"]) {
		rule := obj(rl)
		var refs []any
		for _, b := range list(rule["backendRefs"]) {
			br := obj(b)
			asb := w.remote[remoteKey("AIServiceBackend", ns, str(br["name"]))]
			if asb == nil {
				return fmt.Sprintf("failed to construct a new HTTPRoute: failed to get AIServiceBackend %s.%s: AIServiceBackend %s.%s not found", br["name"], ns, br["name"], ns)
			}
			ref := deepCopy(obj(obj(asb.manifest["spec"])["backendRef"]))
			if wt, ok := br["weight"]; ok {
				ref["weight"] = wt
			}
			refs = append(refs, ref)
		}
		rules = append(rules, map[string]any{"backendRefs": refs, "matches": deepCopy(rule["matches"])})
	}
	rules = append(rules, map[string]any{"name": "route-not-found"})
	m := map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": name, "namespace": ns, "annotations": map[string]any{"gateway.envoyproxy.io/ai-gateway-generated": "true"}},
		"spec":     map[string]any{"parentRefs": deepCopy(spec["parentRefs"]), "rules": rules},
	}
	key := remoteKey("HTTPRoute", ns, name)
	if h := w.remote[key]; h != nil {
		h.manifest = m // Update keeps the status and the owner it was created with
	} else {
		w.create(key, m, route.uid)
	}
	for _, p := range list(spec["parentRefs"]) {
		pr := obj(p)
		pns := ns
		if n := str(pr["namespace"]); n != "" {
			pns = n
		}
		if w.remote[remoteKey("Gateway", pns, str(pr["name"]))] == nil {
			return fmt.Sprintf("failed to sync gw pods: gateway %s/%s not found", pns, pr["name"])
		}
	}
	return ""
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
