package sim

import (
	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/gatewayready"
)

// rule is a readiness rule for the Envoy rollout.
type rule int

const (
	// ruleProject is this project's rule, as the real function evaluates it.
	ruleProject rule = iota
	// ruleThreadFinal is the upstream thread's final rule: observedGeneration
	// == generation, a non-empty marker, updatedReplicas == status.replicas,
	// and at least one available replica.
	ruleThreadFinal
	// ruleReviewer is the reviewer's alternative: updatedReplicas ==
	// status.replicas == spec.replicas and the Deployment's Available
	// condition, without the marker.
	ruleReviewer
	// ruleFirst is the first version: the marker and readyReplicas ==
	// status.replicas.
	ruleFirst
)

var rules = []rule{ruleProject, ruleThreadFinal, ruleReviewer, ruleFirst}

func (r rule) String() string {
	return [...]string{"this project", "thread's final rule", "reviewer's alternative", "first version"}[r]
}

// beforeRollout reports whether a GatewayReady reason comes from a check the
// function makes before it judges the rollout, so the rollout rule was not
// consulted.
func beforeRollout(reason string) bool {
	switch reason {
	case gatewayready.ReasonNotProgrammed, gatewayready.ReasonAnchorNotAccepted, gatewayready.ReasonClientPolicyNotAccepted, gatewayready.ReasonTrafficPolicyNotAccepted, gatewayready.ReasonDeploymentNotObserved:
		return true
	}
	return false
}

// applyRule swaps the rollout part of GatewayReady for an alternative rule.
// Everything else stays the real function's: the Gateway, anchor, client
// policy and Deployment-observed checks it made, and the composed
// resources. The alternative sees the same Deployment manifest the
// function saw.
func (w *world) applyRule(x *xr) {
	if w.cfg.rule == ruleProject {
		return
	}
	if beforeRollout(x.conditions["GatewayReady"].reason) {
		return
	}
	o := w.objects[x.key()+"/"+gateway.ResourceEnvoyDeployment]
	if o == nil || !o.synced || o.snapshot == nil {
		return
	}
	d := o.snapshot
	md, _ := d["metadata"].(map[string]any)
	st, _ := d["status"].(map[string]any)
	spec, _ := d["spec"].(map[string]any)
	num := func(m map[string]any, k string) float64 { v, _ := m[k].(float64); return v }
	tmpl, _ := spec["template"].(map[string]any)
	tmd, _ := tmpl["metadata"].(map[string]any)
	ann, _ := tmd["annotations"].(map[string]any)
	marker := ann[hashKey] != nil && ann[hashKey] != "" || ann[uuidKey] != nil && ann[uuidKey] != ""
	available := false
	conds, _ := st["conditions"].([]any)
	for _, cd := range conds {
		m := cd.(map[string]any)
		if m["type"] == "Available" && m["status"] == "True" {
			available = true
		}
	}
	gen, obs := num(md, "generation"), num(st, "observedGeneration")
	rep, upd, avl, rdy := num(st, "replicas"), num(st, "updatedReplicas"), num(st, "availableReplicas"), num(st, "readyReplicas")
	var ok bool
	switch w.cfg.rule {
	case ruleProject:
		// Returned above: the function's own verdict stands.
		return
	case ruleThreadFinal:
		ok = obs == gen && marker && upd == rep && avl >= 1
	case ruleReviewer:
		ok = obs >= gen && upd == rep && rep == num(spec, "replicas") && available
	case ruleFirst:
		ok = marker && rep >= 1 && rdy == rep
	}
	reason := "AlternativeRule"
	if ok {
		reason = "Serving"
	}
	x.setCondition("GatewayReady", condition{status: ok, reason: reason}, w.clock())
}
