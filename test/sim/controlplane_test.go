package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/modelplaneai/function-inference-gateway/fn"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
	"github.com/modelplaneai/function-inference-gateway/internal/rollout"
	"github.com/modelplaneai/function-inference-gateway/internal/route"
)

// function is the real function under test.
var function = fn.New(logging.NewNopLogger())

// cpObject is a provider-kubernetes Object on the control plane.
type cpObject struct {
	owner    string // the composite's key
	resource string // composition resource name
	spec     map[string]any
	// generation is metadata.generation: 1 at creation, bumped by the API
	// server with every change of the spec.
	generation int64
	// finalized: the provider has added its finalizer.
	finalized bool
	// what the provider last reported
	reported bool
	snapshot map[string]any
	synced   bool
	syncMsg  string
	syncGen  int64 // Synced's observedGeneration
	ready    bool
	readyGen int64 // Ready's observedGeneration, 0 when not set
}

type celProgram = cel.Program

func (o *cpObject) manifest() map[string]any {
	fp, _ := o.spec["forProvider"].(map[string]any)
	m, _ := fp["manifest"].(map[string]any)
	return m
}

func (o *cpObject) remoteKey() string {
	m := o.manifest()
	md, _ := m["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	n, _ := md["name"].(string)
	k, _ := m["kind"].(string)
	return remoteKey(k, ns, n)
}

func (o *cpObject) policies() []string {
	raw, _ := o.spec["managementPolicies"].([]any)
	var out []string
	for _, p := range raw {
		out = append(out, p.(string))
	}
	return out
}

func (o *cpObject) observeOnly() bool {
	p := o.policies()
	return len(p) == 1 && p[0] == "Observe"
}

func (o *cpObject) deletes() bool {
	p := o.policies()
	return len(p) == 0 || slices.Contains(p, "*") || slices.Contains(p, "Delete")
}

// --- provider-kubernetes --------------------------------------------------

// finalizerName is crossplane-runtime's managed resource finalizer.
const finalizerName = "finalizer.managedresource.crossplane.io"

// observe is one reconcile of an Object by provider-kubernetes on
// crossplane-runtime's managed reconciler (provider-kubernetes v1.4.1 and
// v1.3.1 internal/controller/namespaced/object/object.go; crossplane-runtime
// v2.4.0, which both run in the control-plane suite,
// pkg/reconciler/managed/reconciler.go):
//
//   - Observe first resolves spec.references: it reads each referenced
//     control-plane object and patches the value into its in-memory copy of
//     the Object's manifest (resolveReferencies, Reference.
//     ApplyFromFieldPathPatch). A missing object or field fails the
//     reconcile: Synced=False, nothing applied, status.atProvider and Ready
//     left as they were.
//   - An observe-only Object whose remote object is gone reports
//     Synced=False but keeps its old manifest and Ready ("external resource
//     does not exist").
//   - Then the finalizer is added, by an Update of the whole in-memory
//     Object (AddFinalizer), on the first reconcile that gets this far.
//   - A remote object that does not exist is created after another full
//     Update (SetExternalCreatePending); Ready is Creating (False) until
//     the next reconcile.
//   - Otherwise the manifest is applied if it differs from the remote
//     object; Ready comes from the readiness policy: DeriveFromCelQuery is
//     evaluated on the live object (with cel-go, in provider-kubernetes'
//     environment), SuccessfulCreate is Available only on a reconcile that
//     found the object up to date.
//
// Every condition the reconciler marks carries the Object's generation as
// observedGeneration (crossplane-runtime pkg/conditions); Available and
// Unavailable are set beside it, without one.
//
// Either full Update stores whatever the in-memory Object holds, the
// resolved references included: invariant 6 flags it when that is an API
// key.
func (w *world) observe(o *cpObject) {
	key := o.remoteKey()
	desired, patched, err := w.resolveReferences(o)
	if err != "" {
		o.synced, o.syncMsg, o.syncGen = false, "cannot resolve resource references: "+err, o.generation
		return
	}
	if o.observeOnly() {
		live := w.read(key)
		if live == nil {
			o.synced, o.syncMsg, o.syncGen = false, "cannot observe external resource: external resource does not exist", o.generation
			return
		}
		w.addFinalizer(o, desired, patched)
		o.reported, o.synced, o.syncMsg, o.syncGen, o.snapshot = true, true, "", o.generation, live
		w.setReady(o, live, true)
		return
	}
	w.addFinalizer(o, desired, patched)
	r := w.remote[key]
	if r == nil {
		w.writeBack(o, desired, patched, "marks the create pending")
		w.create(key, desired, 0)
		if strings.HasPrefix(key, "AIGatewayRoute/"+gwNS+"/") {
			w.anchorCreated = true
		}
		o.reported, o.synced, o.syncMsg, o.syncGen, o.snapshot = true, true, "", o.generation, w.read(key)
		o.ready, o.readyGen = false, o.generation // Creating
		return
	}
	upToDate := reflect.DeepEqual(r.manifest, desired)
	r.manifest = desired
	live := w.read(key)
	o.reported, o.synced, o.syncMsg, o.syncGen, o.snapshot = true, true, "", o.generation, live
	w.setReady(o, live, upToDate)
}

// setReady sets Ready from the readiness policy on a reconcile that read
// live: the celQuery's verdict, or for SuccessfulCreate Available when the
// object was up to date (handleObservation), and otherwise Ready as it was.
func (w *world) setReady(o *cpObject, live map[string]any, upToDate bool) {
	rd, _ := o.spec["readiness"].(map[string]any)
	if rd == nil || rd["policy"] != "DeriveFromCelQuery" {
		if upToDate {
			o.ready, o.readyGen = true, 0
		}
		return
	}
	o.ready, o.readyGen = w.celReady(rd, live), 0
}

// addFinalizer is AddFinalizer on the first reconcile that gets past
// observing: a full Update of the in-memory Object.
func (w *world) addFinalizer(o *cpObject, desired map[string]any, patched bool) {
	if o.finalized {
		return
	}
	o.finalized = true
	w.writeBack(o, desired, patched, "adds its finalizer")
}

// writeBack is a full Update of the Object by the provider: if references
// were resolved into the in-memory manifest, the resolved manifest becomes
// the Object's spec, and the generation goes up. Invariant 6: an API key
// must never be stored in an Object's spec.
func (w *world) writeBack(o *cpObject, desired map[string]any, patched bool, why string) {
	if !patched {
		return
	}
	spec := maps.Clone(o.spec)
	fp := maps.Clone(obj(spec["forProvider"]))
	fp["manifest"] = deepCopy(desired)
	spec["forProvider"] = fp
	o.spec = spec
	o.generation++
	w.violate("invariant 6: the API key is stored in the spec of Object %s/%s: provider-kubernetes resolved its references and %s with a full Update", o.owner, o.resource, why)
}

// resolveReferences returns the manifest with every patchesFrom reference
// applied, whether any was, or what failed. Referenced objects are read on
// the control plane; the model holds the API-key Secrets of the routes'
// namespace.
func (w *world) resolveReferences(o *cpObject) (map[string]any, bool, string) {
	refs := list(o.spec["references"])
	if len(refs) == 0 {
		return deepCopy(o.manifest()), false, ""
	}
	m := deepCopy(o.manifest())
	for _, r := range refs {
		pf := obj(obj(r)["patchesFrom"])
		if pf == nil {
			continue
		}
		name := str(pf["name"])
		data, ok := w.secrets[name]
		if pf["kind"] != "Secret" || pf["namespace"] != "ml-team" || !ok {
			return nil, false, fmt.Sprintf("cannot get referenced resource: %ss %q not found", strings.ToLower(str(pf["kind"])), name)
		}
		fp := str(pf["fieldPath"])
		if fp == "" {
			continue // dependsOn only
		}
		from, _ := getPath(map[string]any{"data": data}, fp)
		if from == nil {
			return nil, false, fmt.Sprintf("cannot patch from referenced resource: %s: no such field", fp)
		}
		to := str(obj(r)["toFieldPath"])
		if to == "" {
			to = fp
		}
		setPath(m, to, from)
	}
	return m, true, ""
}

// splitPath splits a crossplane field path (a.b[c].d) into its keys. It
// knows string keys only, which is all the model's references use.
func splitPath(p string) []string {
	var out []string
	for part := range strings.SplitSeq(p, ".") {
		for part != "" {
			i := strings.IndexByte(part, '[')
			if i < 0 {
				out = append(out, part)
				break
			}
			if i > 0 {
				out = append(out, part[:i])
			}
			j := strings.IndexByte(part, ']')
			out = append(out, part[i+1:j])
			part = part[j+1:]
		}
	}
	return out
}

func getPath(m map[string]any, p string) (any, bool) {
	var cur any = m
	for _, k := range splitPath(p) {
		c, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = c[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func setPath(m map[string]any, p string, v any) {
	keys := splitPath(p)
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = v
}

func (w *world) read(key string) map[string]any {
	if key == remoteKey("Deployment", egNS, depName) {
		if w.dep == nil {
			return nil
		}
		return w.dep.manifest()
	}
	r := w.remote[key]
	if r == nil {
		return nil
	}
	out := map[string]any{}
	maps.Copy(out, r.manifest)
	out["status"] = r.status
	// JSON shape, as the provider reads it.
	b, _ := json.Marshal(out)
	m := map[string]any{}
	_ = json.Unmarshal(b, &m)
	return m
}

// celReady evaluates a DeriveFromCelQuery readiness on the live object.
func (w *world) celReady(rd, live map[string]any) bool {
	q, _ := rd["celQuery"].(string)
	prg, ok := w.celByExpr[q]
	if !ok {
		env, err := rollout.NewEnv()
		if err != nil {
			panic(err)
		}
		ast, iss := env.Compile(q)
		if iss.Err() != nil {
			w.violate("provider-kubernetes cannot compile the celQuery %q: %v", q, iss.Err())
			return false
		}
		if prg, err = env.Program(ast); err != nil {
			panic(err)
		}
		w.celByExpr[q] = prg
	}
	out, _, err := prg.Eval(map[string]any{"object": live})
	if err != nil {
		return false
	}
	b, _ := out.Value().(bool)
	return b
}

// --- Crossplane -----------------------------------------------------------

func (x *xr) key() string { return x.kind + "/" + x.name }

func (x *xr) object() map[string]any {
	md := map[string]any{"name": x.name}
	api := "modelplane.ai/v1alpha1"
	if x.kind == "ModelRoute" {
		md["namespace"] = "ml-team"
	}
	o := map[string]any{"apiVersion": api, "kind": x.kind, "metadata": md, "spec": x.spec}
	st := map[string]any{}
	maps.Copy(st, x.status)
	var conds []any
	for _, t := range sortedKeys(x.conditions) {
		c := x.conditions[t]
		s := "False"
		if c.status {
			s = "True"
		}
		cd := map[string]any{"type": t, "status": s, "reason": c.reason}
		if !c.since.IsZero() {
			cd["lastTransitionTime"] = c.since.UTC().Format(time.RFC3339)
		}
		conds = append(conds, cd)
	}
	if conds != nil {
		st["conditions"] = conds
	}
	o["status"] = st
	return o
}

func mustStruct(m map[string]any) *structpb.Struct {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	s := &structpb.Struct{}
	if err := s.UnmarshalJSON(b); err != nil {
		panic(err)
	}
	return s
}

// observedFor is what Crossplane sends as observed composed resources: the
// Objects it composed for x, with their status.
func (w *world) observedFor(x *xr) map[string]*fnv1.Resource {
	out := map[string]*fnv1.Resource{}
	for _, o := range w.objects {
		if o.owner != x.key() {
			continue
		}
		md := map[string]any{
			"name": o.resource + "-x", "namespace": gwNS, "generation": float64(o.generation),
			"annotations": map[string]any{"crossplane.io/composition-resource-name": o.resource},
		}
		if o.finalized {
			md["finalizers"] = []any{finalizerName}
		}
		ob := map[string]any{"apiVersion": remote.APIVersion, "kind": remote.Kind, "metadata": md, "spec": o.spec}
		if o.reported || o.syncMsg != "" {
			synced := map[string]any{"type": "Synced", "status": titleBool(o.synced), "message": o.syncMsg, "observedGeneration": float64(o.syncGen)}
			ready := map[string]any{"type": "Ready", "status": titleBool(o.ready)}
			if o.readyGen != 0 {
				ready["observedGeneration"] = float64(o.readyGen)
			}
			st := map[string]any{"conditions": []any{synced, ready}}
			if o.snapshot != nil {
				st["atProvider"] = map[string]any{"manifest": o.snapshot}
			}
			ob["status"] = st
		}
		out[o.resource] = &fnv1.Resource{Resource: mustStruct(ob)}
	}
	return out
}

func titleBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// reconcile is one reconcile of a composite by Crossplane: it runs the
// function, resolving required resources until the requirements stop
// changing (at most five calls, crossplane internal/xfn), stops on a Fatal
// result without applying or deleting anything, and otherwise applies every
// desired Object and deletes every observed one that is no longer desired
// (the composed resource garbage collector).
func (w *world) reconcile(x *xr) {
	if x.deleted {
		return
	}
	if x == w.gateway {
		w.gatewayReconciles++
	}
	w.reconciles++
	req := &fnv1.RunFunctionRequest{
		Meta:     &fnv1.RequestMeta{Tag: "sim"},
		Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: mustStruct(x.object())}, Resources: w.observedFor(x)},
		Desired:  &fnv1.State{},
	}
	var rsp *fnv1.RunFunctionResponse
	var last *fnv1.Requirements
	for range 5 {
		var err error
		rsp, err = function.RunFunction(context.Background(), req)
		if err != nil {
			w.violate("RunFunction returned an error: %v", err)
			return
		}
		if proto.Equal(rsp.GetRequirements(), last) || rsp.GetRequirements() == nil {
			break
		}
		last = rsp.GetRequirements()
		w.resolving = x
		req.RequiredResources = w.resolve(last)
		w.resolving = nil
	}
	for _, r := range rsp.GetResults() {
		if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
			w.violate("%s: unexpected Fatal: %s", x.key(), r.GetMessage())
			return
		}
	}
	desired := rsp.GetDesired().GetResources()
	for name, r := range desired {
		k := x.key() + "/" + name
		o := w.objects[k]
		spec, _ := r.GetResource().AsMap()["spec"].(map[string]any)
		switch {
		case o == nil:
			o = &cpObject{owner: x.key(), resource: name, generation: 1}
			w.objects[k] = o
		case !reflect.DeepEqual(o.spec, spec):
			o.generation++
		}
		o.spec = spec
	}
	for k, o := range w.objects {
		if o.owner == x.key() && desired[o.resource] == nil {
			w.deleteObject(k, o, x)
		}
	}
	st := rsp.GetDesired().GetComposite().GetResource().AsMap()["status"]
	x.status, _ = st.(map[string]any)
	delete(x.status, "conditions")
	for _, c := range rsp.GetConditions() {
		x.setCondition(c.GetType(), condition{status: c.GetStatus() == fnv1.Status_STATUS_CONDITION_TRUE, reason: c.GetReason()}, w.clock())
	}
	if x.kind == "InferenceGateway" {
		w.applyRule(x)
		w.gatewaySeen = append(w.gatewaySeen, x.object())
	}
}

// noteOutageRead records, for invariant 9, that the ModelRoute being
// reconciled read g, a copy of its gateway, as not ready since the gateway's
// current outage began: it has heard of that outage.
func (w *world) noteOutageRead(g map[string]any) {
	cur := w.gateway.conditions["GatewayReady"]
	if w.resolving == nil || w.resolving.kind != "ModelRoute" || cur.status {
		return
	}
	st, _ := g["status"].(map[string]any)
	for _, c := range list(st["conditions"]) {
		m := obj(c)
		since, _ := time.Parse(time.RFC3339, str(m["lastTransitionTime"]))
		if m["type"] == "GatewayReady" && m["status"] == "False" && !since.Before(cur.since) {
			w.heardOutage[w.resolving.name] = true
		}
	}
}

// clock is the model's time: one second per reconcile so far.
func (w *world) clock() time.Time {
	return time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC).Add(time.Duration(w.reconciles) * time.Second)
}

// setCondition sets a condition as Crossplane does: a change of status or
// reason stamps it now, anything else keeps its time (crossplane apis
// v2.4.0 core/v2/condition.go, SetConditions and Equal).
func (x *xr) setCondition(t string, c condition, now time.Time) {
	if old, ok := x.conditions[t]; ok && old.status == c.status && old.reason == c.reason {
		c.since = old.since
	} else {
		c.since = now
	}
	x.conditions[t] = c
}

// resolve answers the function's requirements from the control plane.
func (w *world) resolve(reqs *fnv1.Requirements) map[string]*fnv1.Resources {
	out := map[string]*fnv1.Resources{}
	for name, sel := range reqs.GetResources() {
		rs := &fnv1.Resources{}
		switch sel.GetKind() {
		case "InferenceGateway":
			if w.gateway != nil && !w.gateway.deleted && w.gateway.name == sel.GetMatchName() {
				g := w.gateway.object()
				if n := len(w.gatewaySeen); w.cfg.lagging && n > 0 && w.rng.IntN(3) == 0 {
					g = w.gatewaySeen[n-1-w.rng.IntN(min(n, 5))]
				}
				w.noteOutageRead(g)
				rs.Items = append(rs.Items, &fnv1.Resource{Resource: mustStruct(g)})
			}
		case "Secret":
			if s, ok := w.secrets[sel.GetMatchName()]; ok {
				rs.Items = append(rs.Items, &fnv1.Resource{Resource: mustStruct(map[string]any{
					"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": sel.GetMatchName(), "namespace": "ml-team"}, "data": s})})
			}
		}
		out[name] = rs
	}
	return out
}

// deleteObject is Crossplane deleting a composed Object, and
// provider-kubernetes deleting the remote object unless the Object's
// management policies leave out Delete.
func (w *world) deleteObject(k string, o *cpObject, owner *xr) {
	delete(w.objects, k)
	w.deletions = append(w.deletions, k)
	if owner != nil && !owner.deleted && owner.kind == "ModelRoute" && impliedByRoute(owner)[o.resource] {
		w.violate("invariant 3: %s deleted while %s still names it", o.resource, owner.key())
	}
	if m := o.manifest(); owner != nil && !owner.deleted && (m["kind"] == "Backend" || m["kind"] == "AIServiceBackend") && w.routeNames(o) {
		w.violate("invariant 7: %s deleted while the AIGatewayRoute on the gateway cluster still names it", o.resource)
	}
	if o.deletes() && !o.observeOnly() {
		delete(w.remote, o.remoteKey())
	}
}

// routeNames reports whether a live AIGatewayRoute in the Object's
// namespace has a backendRef with the name of the Object's manifest.
func (w *world) routeNames(o *cpObject) bool {
	md, _ := o.manifest()["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	for k, r := range w.remote {
		if !strings.HasPrefix(k, remoteKey("AIGatewayRoute", ns, "")) {
			continue
		}
		spec, _ := r.manifest["spec"].(map[string]any)
		rules, _ := spec["rules"].([]any)
		for _, rule := range rules {
			refs, _ := rule.(map[string]any)["backendRefs"].([]any)
			for _, ref := range refs {
				if ref.(map[string]any)["name"] == name {
					return true
				}
			}
		}
	}
	return false
}

// impliedByRoute is what a ModelRoute's spec implies, computed here
// independently of the function.
func impliedByRoute(x *xr) map[string]bool {
	out := map[string]bool{route.ResourceNamespace: true, route.ResourceRoute: true, route.ResourceHTTPRoute: true}
	bs, _ := x.spec["backends"].([]any)
	for _, b := range bs {
		m := b.(map[string]any)
		n := m["name"].(string)
		out["backend-"+n], out["aibackend-"+n] = true, true
		if m["apiKey"] != nil {
			out["credential-"+n], out["credpolicy-"+n] = true, true
		}
	}
	return out
}

// deleteXR is the user deleting a composite: Crossplane deletes everything
// it composed (the function does not run on deletion).
func (w *world) deleteXR(x *xr) {
	x.deleted = true
	for k, o := range w.objects {
		if o.owner == x.key() {
			w.deleteObject(k, o, nil)
		}
	}
}
