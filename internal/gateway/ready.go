package gateway

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/crossplane/function-sdk-go/errors"

	"github.com/modelplaneai/function-inference-gateway/internal/decode"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
	"github.com/modelplaneai/function-inference-gateway/internal/rollout"
)

// ConditionType is the condition this package reports on an InferenceGateway.
const ConditionType = "GatewayReady"

// Reasons for GatewayReady. The rollout reasons are the names of the rollout
// rule's clauses (package rollout).
const (
	// ReasonReady: the gateway serves, and every pod that serves has the
	// ext-proc sidecar.
	ReasonReady = "Serving"

	// ReasonNotProgrammed: the Gateway has no address yet.
	ReasonNotProgrammed = "GatewayNotProgrammed"

	// ReasonAnchorNotAccepted: AI Gateway has not accepted the anchor route.
	ReasonAnchorNotAccepted = "AnchorNotAccepted"

	// ReasonClientPolicyNotAccepted: Envoy Gateway has not accepted the
	// ClientTrafficPolicy, so bodies over its default 32 KiB buffer fail.
	ReasonClientPolicyNotAccepted = "ClientPolicyNotAccepted"

	// ReasonDeploymentNotObserved: the Envoy Deployment has not been seen,
	// or the last look found it gone.
	ReasonDeploymentNotObserved = "DeploymentNotObserved"

	ReasonGenerationNotObserved = string(rollout.GenerationNotObserved)
	ReasonExtProcMarkerMissing  = string(rollout.ExtProcMarkerMissing)
	ReasonOldReplicasPresent    = string(rollout.OldReplicasPresent)
	ReasonNoReplicaAvailable    = string(rollout.NoReplicaAvailable)
)

// Verdict is the gateway's readiness and why.
type Verdict struct {
	Ready   bool
	Reason  string
	Message string
}

// problem is one failed check.
type problem struct {
	reason, message string
}

// evidence is what the observed composed resources show.
type evidence struct {
	address        string
	gatewayLive    bool
	anchorAccepted bool
	// clientPolicyAccepted: Envoy Gateway accepted the ClientTrafficPolicy.
	clientPolicyAccepted bool
	deployment           *appsv1.Deployment
	rollout              rollout.Verdict
	problems             []problem
}

// observe reads the evidence for GatewayReady from the observed Objects.
// It trusts only a live manifest: an observe-only Object keeps its old
// manifest and Ready condition after the remote object is gone.
func (b builder) observe(obs map[string]remote.Observed, rule *rollout.Rule) (*evidence, error) {
	e := &evidence{}
	gw, ok := obs[ResourceGateway]
	switch {
	case !ok || !gw.Live():
		e.add(ReasonNotProgrammed, fmt.Sprintf("the Gateway %q in %q has not been observed on the gateway cluster yet%s", b.in.GatewayName, b.in.GatewayNamespace, syncNote(gw, ok)))
	default:
		e.gatewayLive = true
		addr, err := firstAddress(gw.Manifest())
		if err != nil {
			return nil, errors.Wrapf(err, "cannot read the observed Gateway %q", b.in.GatewayName)
		}
		e.address = addr
		if addr == "" {
			e.add(ReasonNotProgrammed, fmt.Sprintf("the Gateway %q in %q has no address yet; Envoy Gateway sets status.addresses once it has programmed it", b.in.GatewayName, b.in.GatewayNamespace))
		}
	}

	anchor := names.AnchorRoute(b.in.GatewayName)
	ar, ok := obs[ResourceAnchorRoute]
	switch {
	case !ok || !ar.Live():
		e.add(ReasonAnchorNotAccepted, fmt.Sprintf("the anchor AIGatewayRoute %q has not been observed yet%s", anchor, syncNote(ar, ok)))
	default:
		acc, err := accepted(ar.Manifest())
		if err != nil {
			return nil, errors.Wrapf(err, "cannot read the observed anchor AIGatewayRoute %q", anchor)
		}
		e.anchorAccepted = acc.True()
		if !acc.True() {
			msg := fmt.Sprintf("AI Gateway has not accepted the anchor AIGatewayRoute %q yet", anchor)
			if acc.Message != "" {
				msg += ": " + acc.Message
			}
			e.add(ReasonAnchorNotAccepted, msg)
		}
	}

	if err := b.observeClientPolicy(e, obs); err != nil {
		return nil, err
	}

	dn := names.EnvoyDeployment(b.in.GatewayNamespace, b.in.GatewayName)
	dep, ok := obs[ResourceEnvoyDeployment]
	if !ok || !dep.Live() {
		e.add(ReasonDeploymentNotObserved, fmt.Sprintf("the Envoy Deployment %q in %q has not been observed%s", dn, b.in.EnvoyGatewayNamespace, syncNote(dep, ok)))
		return e, nil
	}
	live := dep.Manifest()
	d := &appsv1.Deployment{}
	if err := decode.Into(fmt.Sprintf("the observed Envoy Deployment %q", dn), "", live, d); err != nil {
		return nil, err
	}
	e.deployment = d
	v, err := rule.Evaluate(live)
	if err != nil {
		return nil, err
	}
	e.rollout = v
	for _, c := range v.Failed {
		e.add(string(c), rolloutMessage(c, d, b.in.ExtProcMarkerAnnotations))
	}
	return e, nil
}

// observeClientPolicy requires Envoy Gateway to have accepted the
// ClientTrafficPolicy for this Gateway. Until it has, the listener keeps
// its 32 KiB buffer and long prompts fail while the gateway looks ready.
func (b builder) observeClientPolicy(e *evidence, obs map[string]remote.Observed) error {
	name := names.ClientPolicy(b.in.GatewayName)
	o, ok := obs[ResourceClientPolicy]
	if !ok || !o.Live() {
		e.add(ReasonClientPolicyNotAccepted, fmt.Sprintf("the ClientTrafficPolicy %q has not been observed yet%s", name, syncNote(o, ok)))
		return nil
	}
	c, err := PolicyAccepted(o.Manifest(), b.in.GatewayNamespace, b.in.GatewayName)
	if err != nil {
		return errors.Wrapf(err, "cannot read the observed ClientTrafficPolicy %q", name)
	}
	e.clientPolicyAccepted = c != nil && c.Status == metav1.ConditionTrue
	if !e.clientPolicyAccepted {
		msg := fmt.Sprintf("Envoy Gateway has not accepted the ClientTrafficPolicy %q for the Gateway %q yet; until it does, request and response bodies over 32 KiB fail", name, b.in.GatewayName)
		if c != nil && c.Message != "" {
			msg += ": " + c.Message
		}
		e.add(ReasonClientPolicyNotAccepted, msg)
	}
	return nil
}

// PolicyAccepted returns the Accepted condition that Envoy Gateway wrote
// for the Gateway ns/name into a policy's status.ancestors (gateway v1.8.1
// internal/gatewayapi/status, policy ancestor status), or nil if it wrote
// none for that Gateway.
func PolicyAccepted(policy map[string]any, ns, name string) (*metav1.Condition, error) {
	st := &gwapiv1.PolicyStatus{}
	if err := decode.Into("status", "", policy["status"], st); err != nil {
		return nil, err
	}
	for _, a := range st.Ancestors {
		r := a.AncestorRef
		if string(r.Name) != name || (r.Namespace != nil && string(*r.Namespace) != ns) {
			continue
		}
		if r.Kind != nil && *r.Kind != "Gateway" {
			continue
		}
		return meta.FindStatusCondition(a.Conditions, string(gwapiv1.PolicyConditionAccepted)), nil
	}
	return nil, nil
}

func (e *evidence) add(reason, message string) {
	e.problems = append(e.problems, problem{reason: reason, message: message})
}

// verdict reports the first failed check as the reason, and every failed
// check in the message.
func (e *evidence) verdict(d string) Verdict {
	if len(e.problems) == 0 && e.rollout.Ready {
		st := e.deployment.Status
		return Verdict{Ready: true, Reason: ReasonReady, Message: fmt.Sprintf(
			"Gateway has address %s; anchor route and client policy accepted; Envoy Deployment %q rolled out with the ext-proc marker: %d of %d replicas run the current template, %d available",
			e.address, d, st.UpdatedReplicas, st.Replicas, st.AvailableReplicas)}
	}
	msgs := make([]string, len(e.problems))
	for i, p := range e.problems {
		msgs[i] = p.message
	}
	msg := msgs[0]
	if len(msgs) > 1 {
		msg += ". Also: " + strings.Join(msgs[1:], "; ")
	}
	return Verdict{Reason: e.problems[0].reason, Message: msg}
}

func rolloutMessage(c rollout.Check, d *appsv1.Deployment, markers []string) string {
	st := d.Status
	switch c {
	case rollout.GenerationNotObserved:
		return fmt.Sprintf("the Deployment controller has not observed generation %d of the Envoy Deployment yet (observedGeneration %d)", d.Generation, st.ObservedGeneration)
	case rollout.ExtProcMarkerMissing:
		return fmt.Sprintf("the Envoy pod template has none of the ext-proc markers %s yet; AI Gateway sets one when it rolls the sidecar in", strings.Join(markers, ", "))
	case rollout.OldReplicasPresent:
		return fmt.Sprintf("%d of %d replicas run the current template; old-template pods may lack the ext-proc sidecar", st.UpdatedReplicas, st.Replicas)
	case rollout.NoReplicaAvailable:
		return fmt.Sprintf("%d of %d replicas are available", st.AvailableReplicas, st.Replicas)
	}
	return string(c)
}

// syncNote explains why an Object's view cannot be trusted.
func syncNote(o remote.Observed, exists bool) string {
	switch {
	case !exists:
		return ""
	case o.Synced.Status == "" && !o.Reported():
		return " (the Object has not reported yet)"
	case !o.Synced.True():
		if o.Synced.Message != "" {
			return fmt.Sprintf(" (the Object is not Synced: %s)", o.Synced.Message)
		}
		return " (the Object is not Synced)"
	}
	return ""
}

// firstAddress reads status.addresses[0].value of a Gateway.
func firstAddress(gw map[string]any) (string, error) {
	st, _ := gw["status"].(map[string]any)
	raw, ok := st["addresses"]
	if !ok || raw == nil {
		return "", nil
	}
	list, ok := raw.([]any)
	if !ok {
		return "", errors.Errorf("status.addresses is a %T, not a list", raw)
	}
	for _, a := range list {
		m, _ := a.(map[string]any)
		if v, _ := m["value"].(string); v != "" {
			return v, nil
		}
	}
	return "", nil
}

// accepted reads the Accepted condition of an AIGatewayRoute. AI Gateway
// keeps at most one condition: Accepted (True) or NotAccepted
// (ai-gateway v1.0.0 internal/controller/controller.go, newConditions).
func accepted(route map[string]any) (remote.Condition, error) {
	st, _ := route["status"].(map[string]any)
	conds, err := remote.Conditions(st)
	if err != nil {
		return remote.Condition{}, err
	}
	if c, ok := conds["Accepted"]; ok {
		return c, nil
	}
	if c, ok := conds["NotAccepted"]; ok {
		return remote.Condition{Status: "False", Reason: c.Reason, Message: c.Message}, nil
	}
	return remote.Condition{}, nil
}

// Accepted reports whether an observed AIGatewayRoute manifest is Accepted.
func Accepted(route map[string]any) (bool, error) {
	c, err := accepted(route)
	return c.True(), err
}
