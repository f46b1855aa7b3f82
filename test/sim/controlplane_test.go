package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/crossplane/function-sdk-go/logging"

	"github.com/modelplaneai/function-inference-gateway/fn"
	"github.com/modelplaneai/function-inference-gateway/internal/rollout"
)

// function is the real function under test.
var function = fn.New(logging.NewNopLogger())

// cpObject is a provider-kubernetes Object on the control plane.
type cpObject struct {
	owner    string // the composite's key
	resource string // composition resource name
	spec     map[string]any
	// what the provider last reported
	reported bool
	snapshot map[string]any
	synced   bool
	syncMsg  string
	ready    bool
	// dirty is set when the remote object changed since the last look.
	dirty bool
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

// observe is one reconcile of an Object by provider-kubernetes: an
// observe-only Object reads the remote object, and if it is gone reports
// Synced=False but keeps its old manifest and Ready (crossplane-runtime's
// managed reconciler stops at "external resource does not exist"); any
// other Object applies its manifest. Ready comes from the readiness policy,
// and DeriveFromCelQuery evaluates the Object's celQuery on the live object
// in provider-kubernetes' CEL environment.
func (w *world) observe(o *cpObject) {
	o.dirty = false
	key := o.remoteKey()
	if o.observeOnly() {
		live := w.read(key)
		if live == nil {
			o.synced, o.syncMsg = false, "cannot observe external resource: external resource does not exist"
			return
		}
		o.reported, o.synced, o.syncMsg, o.snapshot = true, true, "", live
		o.ready = w.readiness(o, live)
		return
	}
	m := o.manifest()
	r := w.remote[key]
	if r == nil {
		r = &remoteObject{status: map[string]any{}}
		w.remote[key] = r
		if strings.HasPrefix(key, "AIGatewayRoute/"+gwNS+"/") {
			w.anchorCreated = true
		}
	}
	r.manifest = m
	live := w.read(key)
	o.reported, o.synced, o.syncMsg, o.snapshot = true, true, "", live
	o.ready = w.readiness(o, live)
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
	for k, v := range r.manifest {
		out[k] = v
	}
	out["status"] = r.status
	// JSON shape, as the provider reads it.
	b, _ := json.Marshal(out)
	m := map[string]any{}
	_ = json.Unmarshal(b, &m)
	return m
}

func (w *world) readiness(o *cpObject, live map[string]any) bool {
	rd, _ := o.spec["readiness"].(map[string]any)
	if rd == nil || rd["policy"] != "DeriveFromCelQuery" {
		return true // SuccessfulCreate
	}
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
	for k, v := range x.status {
		st[k] = v
	}
	var conds []any
	for _, t := range sortedKeys(x.conditions) {
		c := x.conditions[t]
		s := "False"
		if c.status {
			s = "True"
		}
		conds = append(conds, map[string]any{"type": t, "status": s, "reason": c.reason})
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
		obj := map[string]any{
			"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "Object",
			"metadata": map[string]any{"name": o.resource + "-x", "namespace": gwNS, "annotations": map[string]any{"crossplane.io/composition-resource-name": o.resource}},
			"spec":     o.spec,
		}
		if o.reported || o.syncMsg != "" {
			st := map[string]any{"conditions": []any{
				map[string]any{"type": "Synced", "status": fmt.Sprint(titleBool(o.synced)), "message": o.syncMsg},
				map[string]any{"type": "Ready", "status": fmt.Sprint(titleBool(o.ready))},
			}}
			if o.snapshot != nil {
				st["atProvider"] = map[string]any{"manifest": o.snapshot}
			}
			obj["status"] = st
		}
		out[o.resource] = &fnv1.Resource{Resource: mustStruct(obj)}
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
		req.RequiredResources = w.resolve(last)
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
		if o == nil {
			o = &cpObject{owner: x.key(), resource: name, dirty: true}
			w.objects[k] = o
		}
		spec, _ := r.GetResource().AsMap()["spec"].(map[string]any)
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
		x.conditions[c.GetType()] = condition{status: c.GetStatus() == fnv1.Status_STATUS_CONDITION_TRUE, reason: c.GetReason()}
	}
	if x.kind == "InferenceGateway" {
		w.applyRule(x)
	}
}

// resolve answers the function's requirements from the control plane.
func (w *world) resolve(reqs *fnv1.Requirements) map[string]*fnv1.Resources {
	out := map[string]*fnv1.Resources{}
	for name, sel := range reqs.GetResources() {
		rs := &fnv1.Resources{}
		switch sel.GetKind() {
		case "InferenceGateway":
			if w.gateway != nil && !w.gateway.deleted && w.gateway.name == sel.GetMatchName() {
				rs.Items = append(rs.Items, &fnv1.Resource{Resource: mustStruct(w.gateway.object())})
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
	if o.deletes() && !o.observeOnly() {
		delete(w.remote, o.remoteKey())
	}
}

// impliedByRoute is what a ModelRoute's spec implies, computed here
// independently of the function.
func impliedByRoute(x *xr) map[string]bool {
	out := map[string]bool{"namespace": true, "route": true}
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
