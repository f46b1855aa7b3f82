package gateway

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/claim"
	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/decode"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
)

// One gateway per cluster (package claim says why). This file reads the
// claimants and what is left of the previous gateway's Objects from the
// request, has package claim decide, and turns a lost or waiting decision
// into a result that composes nothing on the cluster.

// requireGateways names the requirement for every InferenceGateway.
const requireGateways = "inference-gateways"

// requirePreviousObjects names the requirement for the Objects of the
// InferenceGateway that composed the cluster before this one.
const requirePreviousObjects = "previous-gateway-objects"

// labelComposite is the label Crossplane puts on every composed resource,
// naming its composite: the composite's own crossplane.io/composite label,
// which Crossplane sets to the composite's name when it has none (crossplane
// v2.2.0 internal/controller/apiextensions/composite/api.go,
// APINamingConfigurator.Configure; composition_render.go,
// RenderComposedResourceMetadata copies it to each composed resource).
const labelComposite = "crossplane.io/composite"

// cluster is one InferenceGateway's decision on its cluster (package
// claim), with what turning it into a result needs.
type cluster struct {
	claim.Decision
	// self names the composite.
	self string
	// left are the previous gateway's Objects still there, and fetched
	// whether Crossplane has fetched them (see previousLeft).
	left    []*unstructured.Unstructured
	fetched bool
}

// claimantOf reads an InferenceGateway's claim and the cluster it claims
// (spec.providerConfigName). It reads only what it needs, so another
// gateway's bad spec never fails this one.
func claimantOf(xr map[string]any) (claim.Claimant, string) {
	u := unstructured.Unstructured{Object: xr}
	pc, _, _ := unstructured.NestedString(xr, "spec", "providerConfigName")
	addr, _, _ := unstructured.NestedString(xr, "status", "address")
	rec, _, _ := unstructured.NestedString(xr, "status", "clusterGateway")
	c := claim.Claimant{
		Name: u.GetName(), Created: u.GetCreationTimestamp().Time,
		Claimed: rec != "" && rec == u.GetName(), Serving: addr != "",
		Deleting: u.GetDeletionTimestamp() != nil, Recorded: rec,
	}
	if c.Serving {
		var st struct {
			Conditions []metav1.Condition `json:"conditions"`
		}
		if err := decode.Into("InferenceGateway", "status", xr["status"], &st); err == nil {
			if cond := meta.FindStatusCondition(st.Conditions, ConditionType); cond != nil && cond.Reason == ReasonClusterAlreadyHasGateway {
				c.Serving = false
			}
		}
	}
	return c, pc
}

// clusterOf reads the claimants on this composite's cluster, when Crossplane
// has fetched the InferenceGateways, and what is left of the previous
// gateway's Objects, and decides what the composite does there.
func clusterOf(req compose.Request, providerConfig string) cluster {
	self, _ := claimantOf(req.Composite)
	items, listed := req.Required[requireGateways]
	others := make([]claim.Claimant, 0, len(items))
	for _, it := range items {
		if c, pc := claimantOf(it); pc == providerConfig {
			others = append(others, c)
		}
	}
	left, fetched := previousLeft(req)
	return cluster{
		Decision: claim.Decide(self, others, listed, claim.Leftovers{Fetched: fetched, Left: len(left)}),
		self:     self.Name, left: left, fetched: fetched,
	}
}

// gatewaysRequirement asks for every InferenceGateway (cluster-scoped) of
// the composite's own apiVersion.
func gatewaysRequirement(apiVersion string) compose.Requirement {
	return compose.Requirement{APIVersion: apiVersion, Kind: Kind, MatchLabels: map[string]string{}}
}

// previousRequirement asks for the Objects the InferenceGateway named
// previous composed, in the Input's objectNamespace, by the label
// Crossplane gives them.
func previousRequirement(objectNamespace, previous string) compose.Requirement {
	return compose.Requirement{
		APIVersion: remote.APIVersion, Kind: remote.Kind, Namespace: objectNamespace,
		MatchLabels: map[string]string{labelComposite: previous},
	}
}

// requirements are what an InferenceGateway that composes nothing on its
// cluster asks for: every InferenceGateway, and while it waits the
// previous gateway's Objects.
func (cl cluster) requirements(objectNamespace, apiVersion string) map[string]compose.Requirement {
	r := map[string]compose.Requirement{requireGateways: gatewaysRequirement(apiVersion)}
	if cl.Previous != "" {
		r[requirePreviousObjects] = previousRequirement(objectNamespace, cl.Previous)
	}
	return r
}

// previousLeft returns the previous gateway's Objects that are still there,
// and whether Crossplane has fetched them. An Object that another kind of
// composite controls (a ModelRoute of the same name in the same namespace)
// carries the same label but is not the gateway's; one that nothing
// controls may be the gateway's, orphaned.
func previousLeft(req compose.Request) ([]*unstructured.Unstructured, bool) {
	items, resolved := req.Required[requirePreviousObjects]
	out := make([]*unstructured.Unstructured, 0, len(items))
	for _, it := range items {
		u := &unstructured.Unstructured{Object: it}
		if c := metav1.GetControllerOf(u); c != nil && c.Kind != Kind {
			continue
		}
		out = append(out, u)
	}
	return out, resolved
}

// notComposing is the result of an InferenceGateway that does not compose
// its cluster, which another serves (lose) or whose previous gateway's
// Objects remain (waitForPrevious), or nil when it has won the cluster.
func notComposing(req compose.Request, cl cluster, providerConfig, apiVersion string) *compose.Result {
	switch cl.Outcome {
	case claim.Lost:
		return lose(req, cl, providerConfig, apiVersion)
	case claim.WaitForPrevious:
		return waitForPrevious(req, cl, providerConfig, apiVersion)
	case claim.Won:
	}
	return nil
}

// lose is the result of an InferenceGateway that lost its cluster to
// winner: nothing composed on that cluster, GatewayReady False with
// ClusterAlreadyHasGateway, and the winner's name in status.clusterGateway
// (so it knows whose Objects to wait for should it take over). No Fatal:
// the composite is healthy, only redundant.
func lose(req compose.Request, cl cluster, providerConfig, apiVersion string) *compose.Result {
	res := release(req)
	res.Requirements = cl.requirements(req.Input.ObjectNamespace, apiVersion)
	c := compose.Condition{
		Type:   ConditionType,
		Reason: ReasonClusterAlreadyHasGateway,
		Message: fmt.Sprintf("the InferenceGateway %q already composes the gateway on the cluster of providerConfigName %q (the names there are fixed, one gateway per cluster); %q composes nothing there. Delete it, or set another providerConfigName",
			cl.Winner, providerConfig, cl.self),
	}
	res.Conditions = []compose.Condition{c}
	// No notReadySince: a gateway that loses waits for a person, and the
	// spell of the one that later takes over starts when it composes.
	res.Status = &v1alpha1.InferenceGatewayStatus{ClusterGateway: cl.Winner}
	return res
}

// waitForPrevious is the result of an InferenceGateway that won its cluster
// from one that composed it before, while that one's Objects remain:
// nothing composed on the cluster, GatewayReady False with
// WaitingForPreviousGateway, and the previous gateway still in
// status.clusterGateway, so the next reconcile waits for the same Objects.
//
// Composing now would apply the same fixed names, and each of the previous
// gateway's Objects that then goes deletes its remote object under this
// one: provider-kubernetes deletes the remote object of a deleted Object
// whose policies allow it, and removes the Object's finalizer only once it
// reads the remote object as gone (crossplane-runtime v2.4.0
// pkg/reconciler/managed/reconciler.go, Reconcile, the meta.WasDeleted
// branch; provider-kubernetes v1.3.1 and v1.4.1
// internal/controller/namespaced/object/object.go, Observe reports
// ResourceExists false only on NotFound). So no Object left means no remote
// object left to be deleted.
//
// Nothing wakes it when they go (it does not compose them), so it looks
// again soon: by how long the oldest of them has been deleted
// (compose.GatewayBackoff), or at the default TTL while one of them is not
// being deleted at all, which waits for a person.
func waitForPrevious(req compose.Request, cl cluster, providerConfig, apiVersion string) *compose.Result {
	res := release(req)
	res.Status = &v1alpha1.InferenceGatewayStatus{ClusterGateway: cl.Previous}
	res.Requirements = cl.requirements(req.Input.ObjectNamespace, apiVersion)
	var msg string
	if !cl.fetched {
		msg = fmt.Sprintf("the Objects of the InferenceGateway %q, which composed the gateway on the cluster of providerConfigName %q before, have not been fetched yet; %q composes nothing there until they are gone",
			cl.Previous, providerConfig, cl.self)
	} else {
		since, stuck := req.Now, false
		names := make([]string, 0, len(cl.left))
		for _, o := range cl.left {
			t := o.GetDeletionTimestamp()
			if t == nil {
				stuck = true
				names = append(names, o.GetName()+" (not being deleted)")
				continue
			}
			if t.Time.Before(since) {
				since = t.Time
			}
			names = append(names, o.GetName())
		}
		slices.Sort(names)
		msg = fmt.Sprintf("the InferenceGateway %q composed the gateway on the cluster of providerConfigName %q before; %d of its Objects remain in %q (%s), and deleting them deletes the remote objects of the same fixed names, so %q composes nothing there until they are gone",
			cl.Previous, providerConfig, len(cl.left), req.Input.ObjectNamespace, strings.Join(names, ", "), cl.self)
		if stuck {
			msg += fmt.Sprintf(". An Object not being deleted stays until someone deletes it (its InferenceGateway may have been deleted with orphan propagation): delete it if %q is gone", cl.Previous)
		} else {
			res.RequeueAfter = compose.GatewayBackoff.After(since, req.Now)
		}
	}
	res.Conditions = []compose.Condition{{Type: ConditionType, Reason: reasonWaitingForPreviousGateway, Message: msg}}
	return res
}

// release composes nothing on the cluster, for an InferenceGateway that
// does not compose it (it lost, or waits).
//
// Should it have composed anything before (two gateways created at once,
// each not yet seeing the other), its Objects are first made observe-only
// and only then let go: Crossplane deletes an Object the function stops
// desiring, and provider-kubernetes deletes the remote object with it
// unless the management policies lack Delete (crossplane-runtime v2.4.0
// pkg/reconciler/managed/policies.go, ShouldDelete; reconciler.go skips the
// external delete when it is false). The remote objects are the winner's
// too, so they must never go.
func release(req compose.Request) *compose.Result {
	res := &compose.Result{
		Resources: map[string]compose.Desired{},
		Implied:   map[string]bool{},
	}
	for name, o := range req.Observed {
		if observeOnly(o) {
			continue
		}
		carried := remote.Carry(o.Object())
		spec, _ := carried["spec"].(map[string]any)
		if spec == nil {
			continue
		}
		spec["managementPolicies"] = []any{remote.PolicyObserve}
		res.Resources[name] = compose.Desired{Object: carried}
		res.Implied[name] = true
	}
	return res
}

// observeOnly reports whether an observed Object's management policies
// are exactly Observe, so that deleting it leaves the remote object.
func observeOnly(o remote.Observed) bool {
	ps, _, _ := unstructured.NestedStringSlice(o.Object(), "spec", "managementPolicies")
	return len(ps) == 1 && ps[0] == remote.PolicyObserve
}
