package route

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/decode"
	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
)

// A route with spec.gatewaySelector (a fleet route) is composed on each
// InferenceGateway the selector matches by running the one-gateway
// composer once per gateway, each time over a view of the request in
// which the route names that gateway (spec.gatewayName) and sees only the
// composed resources it composed there. So a fleet route composes on each
// gateway's cluster exactly what a route with gatewayName would, with the
// same names there, and every rule of the one-gateway route (never
// dropping the model's route, waiting for renamed backends, refusing
// another namespace's model name) holds on each cluster by construction.
// docs/design.md, "A fleet route", says why this shape and not a
// composed ModelRoute per gateway.

// Reasons for RoutingReady of a fleet route, beside the one-gateway ones
// each gateway's entry in status.gateways carries.
const (
	// ReasonNoGatewaySelected: spec.gatewaySelector matches no
	// InferenceGateway.
	ReasonNoGatewaySelected = "NoGatewaySelected"
	// ReasonWaitingForGateways: some InferenceGateway the selector
	// matches does not route the model; the message names each and why.
	ReasonWaitingForGateways = "WaitingForGateways"
	// ReasonGatewayDeleting: the InferenceGateway is being deleted, so the
	// route composes nothing more on its cluster.
	ReasonGatewayDeleting = "GatewayDeleting"
)

// requireGateways is the requirement of a fleet route: the
// InferenceGateways its selector's matchLabels select (all of them when it
// has matchExpressions only), filtered here by the whole selector.
const requireGateways = "gateways"

// FleetRequeue is the longest a fleet route waits between reconciles.
// Crossplane does not watch required resources (crossplane v2.3.0
// internal/controller/apiextensions/composite/reconciler.go watches only
// composed resources), and a gateway that starts matching is on a cluster
// the route has nothing on yet to watch, so the route learns of it only by
// looking again: within this interval.
const FleetRequeue = time.Minute

// fleetKey is the composition resource name, in a fleet route, of the
// resource named key on the InferenceGateway gw. An InferenceGateway's
// name never holds a '/' (it is a Kubernetes object name), so the key
// splits back into the two.
func fleetKey(gw, key string) string { return gw + "/" + key }

// composeFleet composes a ModelRoute with spec.gatewaySelector.
func (c Composer) composeFleet(req compose.Request, spec *v1alpha1.ModelRouteSpec, name, ns, apiVersion string) (*compose.Result, error) {
	sel, err := spec.GatewaySelector.Selector()
	if err != nil {
		return nil, err // Validate has checked it
	}
	res := &compose.Result{
		Resources:    map[string]compose.Desired{},
		Implied:      map[string]bool{},
		Requirements: fleetRequirements(req, spec, apiVersion, ns),
	}
	model := spec.ModelName(ns, name)
	items, resolved := req.Required[requireGateways]
	if !resolved {
		// Never delete on missing input: until the gateways are read,
		// everything composed on any of them is carried forward.
		// So is what the status said of them.
		res.Implied = compose.KeepObserved(req)
		kept := slices.SortedFunc(maps.Values(previousGateways(req.Composite)), func(a, b v1alpha1.GatewayRouting) int { return strings.Compare(a.Name, b.Name) })
		return fleetAnswer(req, res, model, kept, nil, compose.Condition{Type: ConditionType, Reason: ReasonWaitingForGateway,
			Message: "the InferenceGateways spec.gatewaySelector selects have not been fetched yet"}), nil
	}
	prev := previousGateways(req.Composite)
	var entries []v1alpha1.GatewayRouting
	var subs []*compose.Result
	for _, gw := range selected(items, sel) {
		e, counted := fleetEntry(gw)
		if counted {
			r, err := c.Compose(gatewayRequest(req, e.Name, gw, prev[e.Name]))
			if err != nil {
				return nil, err
			}
			merge(res, e.Name, r)
			e = routing(e, r)
			subs = append(subs, r)
		}
		entries = append(entries, e)
	}
	return fleetAnswer(req, res, model, entries, subs, fleetCondition(model, spec.GatewaySelector, entries)), nil
}

// fleetRequirements are a fleet route's requirements: the gateways its
// selector's matchLabels select, and the Secrets and CA sources of its
// backends, as a one-gateway route's.
func fleetRequirements(req compose.Request, spec *v1alpha1.ModelRouteSpec, apiVersion, ns string) map[string]compose.Requirement {
	out := requirements(req, spec, apiVersion, ns)
	gw := out[requireGateway]
	delete(out, requireGateway)
	out[requireGateways] = compose.Requirement{APIVersion: gw.APIVersion, Kind: gw.Kind, MatchLabels: spec.GatewaySelector.MatchLabels}
	return out
}

// selected are the gateways among items that sel matches, by name.
func selected(items []map[string]any, sel labels.Selector) []map[string]any {
	var out []map[string]any
	for _, gw := range items {
		ls, _, _ := unstructured.NestedStringMap(gw, "metadata", "labels")
		if sel.Matches(labels.Set(ls)) {
			out = append(out, gw)
		}
	}
	slices.SortFunc(out, func(a, b map[string]any) int {
		return strings.Compare(nestedString(a, "metadata", "name"), nestedString(b, "metadata", "name"))
	})
	return out
}

// fleetEntry is the status entry of the selected gateway gw, and whether
// it counts: serves a cluster, so the model is composed there. A gateway
// being deleted, or one that lost its cluster to another
// (ClusterAlreadyHasGateway: that other one composes there), does not;
// what the route composed through it before is no longer implied, so
// Crossplane deletes it.
func fleetEntry(gw map[string]any) (v1alpha1.GatewayRouting, bool) {
	e := v1alpha1.GatewayRouting{Name: nestedString(gw, "metadata", "name")}
	e.Cluster = nestedString(gw, "spec", "providerConfigName")
	e.Address = nestedString(gw, "status", "address")
	if nestedString(gw, "metadata", "deletionTimestamp") != "" {
		e.Reason, e.Message = ReasonGatewayDeleting, fmt.Sprintf("the InferenceGateway %q is being deleted; nothing is composed on its cluster any more", e.Name)
		return e, false
	}
	if v, err := gateway.ReadVerdict(gw); err == nil && v.Reason == gateway.ReasonClusterAlreadyHasGateway {
		e.Reason, e.Message = ReasonGatewayLostCluster, fmt.Sprintf("the InferenceGateway %q composes nothing on its cluster, which another InferenceGateway serves: %s", e.Name, v.Message)
		return e, false
	}
	return e, true
}

// nestedString is the string at path in o, or "".
func nestedString(o map[string]any, path ...string) string {
	v, _, _ := unstructured.NestedString(o, path...)
	return v
}

// previousGateways are the entries of status.gateways the last reconcile
// wrote, by gateway name.
func previousGateways(xr map[string]any) map[string]v1alpha1.GatewayRouting {
	st := struct {
		Gateways []v1alpha1.GatewayRouting `json:"gateways"`
	}{}
	out := map[string]v1alpha1.GatewayRouting{}
	if decode.Into("the ModelRoute", "status", xr["status"], &st) != nil {
		return out
	}
	for _, g := range st.Gateways {
		out[g.Name] = g
	}
	return out
}

// gatewayRequest is the request as a route with spec.gatewayName set to
// the gateway name would see it: the gateway as its required gateway, the
// composed resources of that gateway under their one-gateway names, and
// the status this route last wrote for that gateway.
func gatewayRequest(req compose.Request, name string, gw map[string]any, prev v1alpha1.GatewayRouting) compose.Request {
	sub := req
	sub.Composite = gatewayComposite(req.Composite, name, prev)
	sub.Observed = map[string]remote.Observed{}
	for k, o := range req.Observed {
		if rest, ok := strings.CutPrefix(k, name+"/"); ok {
			sub.Observed[rest] = o
		}
	}
	sub.Required = make(map[string][]map[string]any, len(req.Required))
	for k, v := range req.Required {
		if k != requireGateways {
			sub.Required[k] = v
		}
	}
	sub.Required[requireGateway] = []map[string]any{gw}
	return sub
}

// gatewayComposite is the ModelRoute xr as a route with spec.gatewayName
// set to name: its spec names that gateway instead of selecting, and its
// status is what this route last wrote for that gateway (RoutingReady,
// when it stopped routing, the verdict it followed), beside Crossplane's
// Responsive condition, which says whether watch events are held back.
func gatewayComposite(xr map[string]any, name string, prev v1alpha1.GatewayRouting) map[string]any {
	out := maps.Clone(xr)
	spec := map[string]any{}
	if m, ok := xr["spec"].(map[string]any); ok {
		maps.Copy(spec, m)
	}
	delete(spec, "gatewaySelector")
	spec["gatewayName"] = name
	out["spec"] = spec

	var conds []any
	st, _ := xr["status"].(map[string]any)
	cs, _ := st["conditions"].([]any)
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok && m["type"] == "Responsive" {
			conds = append(conds, c)
		}
	}
	var kept v1alpha1.ModelRouteStatus
	if prev.Reason != "" {
		ready := metav1.ConditionFalse
		if prev.Routes {
			ready = metav1.ConditionTrue
		}
		conds = append(conds, map[string]any{"type": ConditionType, "status": string(ready), "reason": prev.Reason})
		kept.NotReadySince, kept.FollowedGateway = prev.NotReadySince, prev.FollowedGateway
	}
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&kept)
	if err != nil {
		status = map[string]any{}
	}
	status["conditions"] = conds
	out["status"] = status
	return out
}

// merge adds what r composed on the gateway name to res, under fleet keys.
func merge(res *compose.Result, name string, r *compose.Result) {
	for k, d := range r.Resources {
		res.Resources[fleetKey(name, k)] = d
	}
	for k, v := range r.Implied {
		res.Implied[fleetKey(name, k)] = v
	}
	for _, w := range r.Warnings {
		if !slices.Contains(res.Warnings, w) {
			res.Warnings = append(res.Warnings, w)
		}
	}
	for _, n := range r.Notices {
		if !slices.Contains(res.Notices, n) {
			res.Notices = append(res.Notices, n)
		}
	}
	res.Evidence = append(res.Evidence, append([]any{"fleetGateway", name}, r.Evidence...)...)
}

// routing fills e in from r, the one-gateway answer for its gateway.
func routing(e v1alpha1.GatewayRouting, r *compose.Result) v1alpha1.GatewayRouting {
	if len(r.Conditions) > 0 {
		c := r.Conditions[0]
		e.Routes, e.Reason, e.Message = c.Status, c.Reason, c.Message
	}
	if st, ok := r.Status.(*v1alpha1.ModelRouteStatus); ok {
		e.NotReadySince, e.FollowedGateway = st.NotReadySince, st.FollowedGateway
		if e.Address == "" {
			e.Address = st.Address
		}
	}
	return e
}

// fleetCondition is a fleet route's RoutingReady: True when every
// selected gateway that serves a cluster routes the model, and there is
// at least one; otherwise False, naming each gateway that does not and
// why.
func fleetCondition(model string, sel *v1alpha1.GatewaySelector, entries []v1alpha1.GatewayRouting) compose.Condition {
	c := compose.Condition{Type: ConditionType}
	if len(entries) == 0 {
		c.Reason = ReasonNoGatewaySelected
		c.Message = fmt.Sprintf("no InferenceGateway matches spec.gatewaySelector %s; label the InferenceGateways that should serve model %q, or change the selector", sel, model)
		return c
	}
	var routed, counted []string
	var not []string
	for _, e := range entries {
		switch {
		case e.Routes:
			routed = append(routed, e.Name)
			counted = append(counted, e.Name)
		case e.Reason != ReasonGatewayDeleting && e.Reason != ReasonGatewayLostCluster:
			counted = append(counted, e.Name)
			fallthrough
		default:
			not = append(not, fmt.Sprintf("%s (%s: %s)", e.Name, e.Reason, e.Message))
		}
	}
	if len(counted) > 0 && len(routed) == len(counted) {
		c.Status, c.Reason = true, ReasonAccepted
		c.Message = fmt.Sprintf("model %q routes through every InferenceGateway spec.gatewaySelector selects that serves a cluster: %s", model, strings.Join(routed, ", "))
		if len(not) > 0 {
			c.Message += "; not counted: " + strings.Join(not, "; ")
		}
		return c
	}
	c.Reason = ReasonWaitingForGateways
	c.Message = fmt.Sprintf("model %q routes through %d of the %d InferenceGateways spec.gatewaySelector selects that serve a cluster; not through: %s",
		model, len(routed), len(counted), strings.Join(not, "; "))
	return c
}

// fleetAnswer completes res with the condition c, the status and the
// requeue, from the gateways' entries and their one-gateway answers subs.
func fleetAnswer(req compose.Request, res *compose.Result, model string, entries []v1alpha1.GatewayRouting, subs []*compose.Result, c compose.Condition) *compose.Result {
	res.Conditions = []compose.Condition{c}
	res.Ready = c.Status
	st := &v1alpha1.ModelRouteStatus{Model: model, Gateways: entries,
		NotReadySince: compose.NotReadySince(req.Composite, c, req.Now, true)}
	routed := 0
	for _, e := range st.Gateways {
		if e.Routes {
			routed++
		}
	}
	st.Routed = fmt.Sprintf("%d/%d", routed, len(st.Gateways))
	res.RequeueAfter = FleetRequeue
	for _, r := range subs {
		if r.RequeueAfter > 0 && r.RequeueAfter < res.RequeueAfter {
			res.RequeueAfter = r.RequeueAfter
		}
		// The backends of the gateway with the fewest usable: the
		// route's backends are as usable as on its weakest cluster.
		if s, ok := r.Status.(*v1alpha1.ModelRouteStatus); ok && s.Backends != nil && (st.Backends == nil || s.Backends.Usable < st.Backends.Usable) {
			st.Backends = s.Backends
		}
	}
	res.Status = st
	return res
}
