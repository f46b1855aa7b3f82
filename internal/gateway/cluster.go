package gateway

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/decode"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
)

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

// The gateway cluster's objects have fixed names (the Input's), so two
// InferenceGateways with the same providerConfigName would apply, and on
// deletion delete, the same Gateway, EnvoyProxy and routes. One of them
// wins the cluster and composes; the others compose nothing there and say
// ClusterAlreadyHasGateway.
//
// Each records in status.clusterGateway the InferenceGateway it saw
// compose the cluster: the winner its own name (its claim), a loser the
// winner's. Only the function writes it, on every reconcile, and Crossplane
// applies the composite's status with server-side apply as one field
// manager (crossplane v2.2.0 composition_functions.go,
// FunctionComposer.Compose, the status patch with FieldOwnerXR), so a field
// the function stops writing goes: a loser never keeps a claim.

// claimant is one InferenceGateway's claim on a gateway cluster.
type claimant struct {
	Name    string
	Created time.Time
	// Claimed: its status.clusterGateway is its own name, that is it has
	// composed the cluster. It survives a reconcile in which the Gateway
	// is not observed and status.address is empty.
	Claimed bool
	// Serving: it has an address and is not itself a loser. It orders
	// only gateways that have not claimed yet: one that composed before
	// claims were recorded keeps its cluster until its first reconcile
	// records the claim.
	Serving bool
	// Deleting: it has a deletionTimestamp. It never wins: Crossplane is
	// deleting it, and the garbage collector its Objects.
	Deleting bool
	// Recorded is its status.clusterGateway: the InferenceGateway it last
	// saw compose the cluster.
	Recorded string
}

// pickWinner picks the InferenceGateway that composes a cluster among those not
// being deleted: one that has claimed it, then one that serves, then the
// oldest, then the first by name. A loser never claims nor gets an
// address, because it composes nothing, so a winner keeps the cluster while
// others are created, deleted or recreated, and through a reconcile that
// loses its address. Two created at once may both claim before each sees
// the other; the same order then picks the older, on both sides, and the
// other lets go (see lose). It returns false when every claimant is being
// deleted, or there are none.
func pickWinner(cs []claimant) (claimant, bool) {
	live := slices.DeleteFunc(slices.Clone(cs), func(c claimant) bool { return c.Deleting })
	if len(live) == 0 {
		return claimant{}, false
	}
	return slices.MinFunc(live, compareClaims), true
}

// compareClaims orders claimants by how strong their claim is.
func compareClaims(a, b claimant) int {
	switch {
	case a.Claimed != b.Claimed:
		if a.Claimed {
			return -1
		}
		return 1
	case a.Serving != b.Serving:
		if a.Serving {
			return -1
		}
		return 1
	case !a.Created.Equal(b.Created):
		return a.Created.Compare(b.Created)
	}
	return strings.Compare(a.Name, b.Name)
}

// claimantOf reads an InferenceGateway's claim and the cluster it claims
// (spec.providerConfigName). It reads only what it needs, so another
// gateway's bad spec never fails this one.
func claimantOf(xr map[string]any) (claimant, string) {
	u := unstructured.Unstructured{Object: xr}
	pc, _, _ := unstructured.NestedString(xr, "spec", "providerConfigName")
	addr, _, _ := unstructured.NestedString(xr, "status", "address")
	rec, _, _ := unstructured.NestedString(xr, "status", "clusterGateway")
	c := claimant{
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

// cluster is what one InferenceGateway knows of its cluster's claimants.
type cluster struct {
	self claimant
	// winner composes the cluster; it is self when self wins, or when the
	// list is not resolved yet.
	winner claimant
	// previous, when self wins but has not claimed the cluster yet, names
	// the InferenceGateway that composed it before, whose Objects must be
	// gone before self composes.
	previous string
}

// clusterOf reads the claimants on this composite's cluster, when Crossplane
// has fetched the InferenceGateways. The composite itself counts as it is
// observed now, whether or not the list holds it.
func clusterOf(req compose.Request, providerConfig string) cluster {
	self, _ := claimantOf(req.Composite)
	cl := cluster{self: self, winner: self}
	items, resolved := req.Required[requireGateways]
	if !resolved {
		return cl
	}
	cs := []claimant{self}
	for _, it := range items {
		c, pc := claimantOf(it)
		if pc == providerConfig && c.Name != self.Name {
			cs = append(cs, c)
		}
	}
	if w, ok := pickWinner(cs); ok {
		cl.winner = w
	}
	if cl.winner.Name != self.Name || self.Claimed {
		return cl
	}
	// Self takes the cluster over. The gateway it lost to before, if it
	// did, is the one whose Objects may still be there. Crossplane removes
	// a deleted composite's finalizer at once, without running the
	// pipeline (crossplane v2.2.0
	// internal/controller/apiextensions/composite/reconciler.go, Reconcile,
	// the meta.WasDeleted branch), so the composite is gone from the list
	// while the garbage collector deletes its composed resources, which
	// name it as their controller (composition_render.go,
	// RenderComposedResourceMetadata): after it, as custom resources are
	// deleted in the background by default, or before it only when it was
	// deleted in the foreground (k8s.io/apiserver v0.36.1
	// pkg/registry/generic/registry/store.go,
	// deletionFinalizersForGarbageCollection). A gateway that did not lose
	// to it (created while it was being deleted) sees it only while it is
	// still listed.
	cl.previous = self.Recorded
	if cl.previous == "" {
		deleting := slices.DeleteFunc(cs, func(c claimant) bool { return !c.Deleting || (!c.Claimed && !c.Serving) })
		if len(deleting) > 0 {
			cl.previous = slices.MinFunc(deleting, compareClaims).Name
		}
	}
	return cl
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
	if cl.previous != "" {
		r[requirePreviousObjects] = previousRequirement(objectNamespace, cl.previous)
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
			cl.winner.Name, providerConfig, cl.self.Name),
	}
	res.Conditions = []compose.Condition{c}
	// No notReadySince: a gateway that loses waits for a person, and the
	// spell of the one that later takes over starts when it composes.
	res.Status = &v1alpha1.InferenceGatewayStatus{ClusterGateway: cl.winner.Name}
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
// branch; provider-kubernetes v1.3.1
// internal/controller/namespaced/object/object.go, Observe reports
// ResourceExists false only on NotFound). So no Object left means no remote
// object left to be deleted.
//
// Nothing wakes it when they go (it does not compose them), so it looks
// again soon: by how long the oldest of them has been deleted
// (compose.Backoff), or at the default TTL while one of them is not
// being deleted at all, which waits for a person.
func waitForPrevious(req compose.Request, cl cluster, left []*unstructured.Unstructured, resolved bool, providerConfig, apiVersion string) *compose.Result {
	res := release(req)
	res.Status = &v1alpha1.InferenceGatewayStatus{ClusterGateway: cl.previous}
	res.Requirements = cl.requirements(req.Input.ObjectNamespace, apiVersion)
	var msg string
	if !resolved {
		msg = fmt.Sprintf("the Objects of the InferenceGateway %q, which composed the gateway on the cluster of providerConfigName %q before, have not been fetched yet; %q composes nothing there until they are gone",
			cl.previous, providerConfig, cl.self.Name)
	} else {
		since, stuck := req.Now, false
		names := make([]string, 0, len(left))
		for _, o := range left {
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
			cl.previous, providerConfig, len(left), req.Input.ObjectNamespace, strings.Join(names, ", "), cl.self.Name)
		if stuck {
			msg += fmt.Sprintf(". An Object not being deleted stays until someone deletes it (its InferenceGateway may have been deleted with orphan propagation): delete it if %q is gone", cl.previous)
		} else {
			res.RequeueAfter = compose.Backoff(since, req.Now)
		}
	}
	res.Conditions = []compose.Condition{{Type: ConditionType, Reason: ReasonWaitingForPreviousGateway, Message: msg}}
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
