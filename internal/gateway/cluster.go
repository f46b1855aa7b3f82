package gateway

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/decode"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
)

// requireGateways names the requirement for every InferenceGateway.
const requireGateways = "inference-gateways"

// The gateway cluster's objects have fixed names (the Input's), so two
// InferenceGateways with the same providerConfigName would apply, and on
// deletion delete, the same Gateway, EnvoyProxy and routes. One of them
// wins the cluster and composes; the others compose nothing there and say
// ClusterAlreadyHasGateway.

// Claimant is one InferenceGateway's claim on a gateway cluster.
type Claimant struct {
	Name    string
	Created time.Time
	// Serving: it has an address and is not itself a loser, that is it has
	// composed the cluster's gateway.
	Serving bool
}

// Winner picks the InferenceGateway that composes a cluster: the one that
// serves (it has an address), then the oldest, then the first by name. A
// loser never gets an address, because it composes nothing, and one that
// reports ClusterAlreadyHasGateway does not count as serving whatever its
// status says, so once a gateway serves it keeps the cluster while others
// are created, deleted or recreated. It returns false for no claimants.
func Winner(cs []Claimant) (Claimant, bool) {
	if len(cs) == 0 {
		return Claimant{}, false
	}
	return slices.MinFunc(cs, func(a, b Claimant) int {
		switch {
		case a.Serving != b.Serving:
			if a.Serving {
				return -1
			}
			return 1
		case !a.Created.Equal(b.Created):
			return a.Created.Compare(b.Created)
		}
		return strings.Compare(a.Name, b.Name)
	}), true
}

// claimantOf reads an InferenceGateway's claim and the cluster it claims
// (spec.providerConfigName). It reads only what it needs, so another
// gateway's bad spec never fails this one.
func claimantOf(xr map[string]any) (Claimant, string) {
	u := unstructured.Unstructured{Object: xr}
	pc, _, _ := unstructured.NestedString(xr, "spec", "providerConfigName")
	addr, _, _ := unstructured.NestedString(xr, "status", "address")
	c := Claimant{Name: u.GetName(), Created: u.GetCreationTimestamp().Time, Serving: addr != ""}
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

// clusterWinner returns the InferenceGateway that composes this one's
// cluster, when Crossplane has fetched the InferenceGateways. The composite
// itself counts as it is observed now, whether or not the list holds it.
func clusterWinner(req compose.Request, providerConfig string) (Claimant, bool) {
	items, resolved := req.Required[requireGateways]
	if !resolved {
		return Claimant{}, false
	}
	self, _ := claimantOf(req.Composite)
	cs := []Claimant{self}
	for _, it := range items {
		c, pc := claimantOf(it)
		if pc == providerConfig && c.Name != self.Name {
			cs = append(cs, c)
		}
	}
	return Winner(cs)
}

// gatewaysRequirement asks for every InferenceGateway (cluster-scoped) of
// the composite's own apiVersion.
func gatewaysRequirement(apiVersion string) compose.Requirement {
	return compose.Requirement{APIVersion: apiVersion, Kind: Kind, MatchLabels: map[string]string{}}
}

// lose is the result of an InferenceGateway that lost its cluster to
// winner: nothing composed on that cluster, GatewayReady False with
// ClusterAlreadyHasGateway. No Fatal: the composite is healthy, only
// redundant.
//
// Should it have composed anything before it lost (two gateways created at
// once, each not yet seeing the other), its Objects are first made
// observe-only and only then let go: Crossplane deletes an Object the
// function stops desiring, and provider-kubernetes deletes the remote
// object with it unless the management policies lack Delete
// (crossplane-runtime v2.4.0 pkg/reconciler/managed/policies.go,
// ShouldDelete; reconciler.go skips the external delete when it is false).
// The remote objects are the winner's too, so they must never go.
func lose(req compose.Request, self, winner Claimant, providerConfig, apiVersion string) *compose.Result {
	res := &compose.Result{
		Resources:    map[string]compose.Desired{},
		Implied:      map[string]bool{},
		Requirements: map[string]compose.Requirement{requireGateways: gatewaysRequirement(apiVersion)},
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
	c := compose.Condition{
		Type:   ConditionType,
		Reason: ReasonClusterAlreadyHasGateway,
		Message: fmt.Sprintf("the InferenceGateway %q already composes the gateway on the cluster of providerConfigName %q (the names there are fixed, one gateway per cluster); %q composes nothing there. Delete it, or set another providerConfigName",
			winner.Name, providerConfig, self.Name),
	}
	res.Conditions = []compose.Condition{c}
	res.Status = &Status{NotReadySince: compose.NotReadySince(req.Composite, c, req.Now, false)}
	return res
}

// observeOnly reports whether an observed Object's management policies
// are exactly Observe, so that deleting it leaves the remote object.
func observeOnly(o remote.Observed) bool {
	ps, _, _ := unstructured.NestedStringSlice(o.Object(), "spec", "managementPolicies")
	return len(ps) == 1 && ps[0] == remote.PolicyObserve
}
