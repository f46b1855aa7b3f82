// Package upstream is the one home of what the function knows about the
// upstream APIs it writes and reads: their API groups and versions (taken
// from the upstream Go packages), the CEL readiness queries
// provider-kubernetes evaluates on them, and readers of the status their
// controllers write.
package upstream

import (
	aigv1b1 "github.com/envoyproxy/ai-gateway/api/v1beta1"
	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/decode"
)

// API groups of the kinds the function composes.
const (
	// GatewayAPIGroup is Gateway API's group (Gateway, HTTPRoute).
	GatewayAPIGroup = gwapiv1.GroupName
	// EnvoyGatewayGroup is Envoy Gateway's group (EnvoyProxy, Backend,
	// the traffic policies).
	EnvoyGatewayGroup = egv1a1.GroupName
	// AIGatewayGroup is AI Gateway's group (AIGatewayRoute,
	// AIServiceBackend, BackendSecurityPolicy).
	AIGatewayGroup = aigv1b1.GroupName
)

// API versions of the kinds the function composes.
var (
	// GatewayAPIVersion is the Gateway API version of Gateway and HTTPRoute.
	GatewayAPIVersion = gwapiv1.GroupVersion.String()
	// EnvoyGatewayAPIVersion is Envoy Gateway's API version.
	EnvoyGatewayAPIVersion = egv1a1.GroupVersion.String()
	// AIGatewayAPIVersion is AI Gateway's storage version at v1.0.0.
	AIGatewayAPIVersion = aigv1b1.SchemeGroupVersion.String()
)

// CEL readiness queries for provider-kubernetes' DeriveFromCelQuery. The
// function does not trust the Ready they produce: it reads the same
// evidence from the live manifest with the readers below.
const (
	// CELHasAddress holds once a Gateway has an address.
	CELHasAddress = "has(object.status) && has(object.status.addresses) && size(object.status.addresses) > 0"
	// CELAccepted holds once an object's Accepted condition is True.
	CELAccepted = "has(object.status) && has(object.status.conditions) && object.status.conditions.exists(c, c.type == 'Accepted' && c.status == 'True')"
	// CELPolicyAccepted holds once an Envoy Gateway policy is Accepted for
	// an ancestor. Besides the Object's Ready, it keeps provider-kubernetes
	// looking again every 30 s until Envoy Gateway has accepted the policy:
	// a Ready Object is re-read only every --poll, ten minutes by default
	// (provider-kubernetes v1.3.1 and v1.4.1 internal/controller/namespaced/object/
	// object.go, the poll interval hook).
	CELPolicyAccepted = "has(object.status) && has(object.status.ancestors) && object.status.ancestors.exists(a, has(a.conditions) && a.conditions.exists(c, c.type == 'Accepted' && c.status == 'True'))"
	// CELPolicyAcceptedNow holds once an Envoy Gateway policy is Accepted
	// for an ancestor at the generation it has now. Envoy Gateway stamps
	// each ancestor condition with the policy's generation (gateway v1.8.3
	// internal/gatewayapi/status/policy.go, SetConditionForPolicyAncestor),
	// so after a change the Object stays not Ready, and is looked at again,
	// until Envoy Gateway has judged the change.
	CELPolicyAcceptedNow = "has(object.status) && has(object.status.ancestors) && object.status.ancestors.exists(a, has(a.conditions) && a.conditions.exists(c, c.type == 'Accepted' && c.status == 'True' && has(c.observedGeneration) && c.observedGeneration == object.metadata.generation))"
)

// IsTrue reports whether a condition is there and True.
func IsTrue(c *metav1.Condition) bool { return c != nil && c.Status == metav1.ConditionTrue }

// WithMessage adds an upstream condition's message, if any, to msg.
func WithMessage(msg string, c *metav1.Condition) string {
	if c != nil && c.Message != "" {
		return msg + ": " + c.Message
	}
	return msg
}

// GatewayStatus decodes a Gateway's status once, for GatewayAddress and
// ListenerConditions, which the gateway's reconcile reads for its address
// and for every listener. status is what decode.Into takes: the
// manifest's status as a map or as the protobuf Value the function
// received.
func GatewayStatus(status any) (*gwapiv1.GatewayStatus, error) {
	st := &gwapiv1.GatewayStatus{}
	if err := decode.Into("the Gateway", "status", status, st); err != nil {
		return nil, err
	}
	return st, nil
}

// GatewayAddress is the first non-empty status.addresses[].value of a
// Gateway's status.
func GatewayAddress(st *gwapiv1.GatewayStatus) string {
	for _, a := range st.Addresses {
		if a.Value != "" {
			return a.Value
		}
	}
	return ""
}

// ListenerConditions returns the conditions Envoy Gateway wrote for the
// listener name in a Gateway's status (status.listeners), and whether it
// reported that listener at all. Envoy Gateway rebuilds status.listeners
// from the Gateway's spec on every translation, one entry per listener,
// each condition stamped with the Gateway's generation (gateway v1.8.3
// internal/gatewayapi/contexts.go, the GatewayContext's ResetListeners;
// internal/gatewayapi/status/gateway.go, SetGatewayListenerStatusCondition).
func ListenerConditions(st *gwapiv1.GatewayStatus, name string) ([]metav1.Condition, bool) {
	for _, l := range st.Listeners {
		if string(l.Name) == name {
			return l.Conditions, true
		}
	}
	return nil, false
}

// RouteAccepted returns the acceptance of an AIGatewayRoute from its
// status (a map or a protobuf Value, as decode.Into takes). AI
// Gateway keeps at most one condition, Accepted (True) or NotAccepted
// (False) (ai-gateway v1.0.0 api/v1beta1/status.go;
// internal/controller/controller.go, newConditions); NotAccepted is
// returned as Accepted=False with its reason and message. It is nil while
// AI Gateway has written neither.
func RouteAccepted(status any) (*metav1.Condition, error) {
	st := &aigv1b1.AIGatewayRouteStatus{}
	if err := decode.Into("the AIGatewayRoute", "status", status, st); err != nil {
		return nil, err
	}
	if c := meta.FindStatusCondition(st.Conditions, aigv1b1.ConditionTypeAccepted); c != nil {
		return c, nil
	}
	if c := meta.FindStatusCondition(st.Conditions, aigv1b1.ConditionTypeNotAccepted); c != nil {
		return &metav1.Condition{Type: aigv1b1.ConditionTypeAccepted, Status: metav1.ConditionFalse, Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime}, nil
	}
	return nil, nil
}

// PolicyAccepted returns the Accepted condition Envoy Gateway wrote for the
// Gateway ns/name into a policy's status.ancestors (Gateway API's
// PolicyStatus, apis/v1/policy_types.go), or nil if it wrote none for that
// Gateway. status is the policy's, as decode.Into takes it.
func PolicyAccepted(status any, ns, name string) (*metav1.Condition, error) {
	conds, _, err := PolicyAncestorConditions(status, ns, name, "")
	if err != nil {
		return nil, err
	}
	return meta.FindStatusCondition(conds, string(gwapiv1.PolicyConditionAccepted)), nil
}

// PolicyAncestorConditions returns the conditions Envoy Gateway wrote in a
// policy's status.ancestors for the Gateway ns/name and, unless
// sectionName is empty, that listener, and whether it wrote any. A policy
// on a route has the route's Gateway and listener as its ancestor, and
// with mergeType one entry per listener (gateway v1.8.3
// internal/gatewayapi/securitypolicy.go, processSecurityPolicyForRoute;
// helpers.go, getAncestorRefForPolicy). status is the policy's, as
// decode.Into takes it.
func PolicyAncestorConditions(status any, ns, name, sectionName string) ([]metav1.Condition, bool, error) {
	st := &gwapiv1.PolicyStatus{}
	if err := decode.Into("the policy", "status", status, st); err != nil {
		return nil, false, err
	}
	for _, a := range st.Ancestors {
		r := a.AncestorRef
		if r.Kind != nil && *r.Kind != "Gateway" {
			continue
		}
		if string(r.Name) != name || r.Namespace != nil && string(*r.Namespace) != ns {
			continue
		}
		if sectionName != "" && (r.SectionName == nil || string(*r.SectionName) != sectionName) {
			continue
		}
		return a.Conditions, true, nil
	}
	return nil, false, nil
}

// RouteJudged reports whether Envoy Gateway has judged the HTTPRoute at
// generation for the Gateway ns/name: some status.parents entry of that
// Gateway carries Accepted and ResolvedRefs conditions whose
// observedGeneration is generation or later. Gateway API has each
// controller set a condition's observedGeneration to the generation it
// judged (gateway-api v1.5.1 apis/v1/shared_types.go, RouteParentStatus;
// metav1.Condition.ObservedGeneration), so until then Envoy Gateway may
// still translate an earlier generation. An object without a generation
// (0) cannot tell, and is taken as judged.
func RouteJudged(status any, ns, name string, generation int64) bool {
	if generation == 0 {
		return true
	}
	st := &gwapiv1.HTTPRouteStatus{}
	if decode.Into("the HTTPRoute", "status", status, st) != nil {
		return false
	}
	for _, p := range st.Parents {
		r := p.ParentRef
		if string(r.Name) != name || r.Namespace == nil || string(*r.Namespace) != ns {
			continue
		}
		judged := true
		for _, t := range []gwapiv1.RouteConditionType{gwapiv1.RouteConditionAccepted, gwapiv1.RouteConditionResolvedRefs} {
			c := meta.FindStatusCondition(p.Conditions, string(t))
			judged = judged && c != nil && c.ObservedGeneration >= generation
		}
		if judged {
			return true
		}
	}
	return false
}

// RouteParentConditions returns the conditions Envoy Gateway wrote in an
// HTTPRoute's status (as decode.Into takes it) for its parent Gateway
// ns/name and, unless
// sectionName is empty, that listener (status.parents), and whether it
// wrote any. The route's parentRefs always name the namespace. The
// listener matters: when a route's parentRef moves to another listener,
// Envoy Gateway v1.8.3 keeps the entry of the old one beside the new one,
// with its last verdict (internal/provider/kubernetes/status.go,
// mergeRouteParentStatus keeps every old entry of its own controller), so
// the first entry for the Gateway may be stale.
func RouteParentConditions(status any, ns, name, sectionName string) ([]metav1.Condition, bool, error) {
	st := &gwapiv1.HTTPRouteStatus{}
	if err := decode.Into("the HTTPRoute", "status", status, st); err != nil {
		return nil, false, err
	}
	for _, p := range st.Parents {
		r := p.ParentRef
		if string(r.Name) != name || r.Namespace == nil || string(*r.Namespace) != ns {
			continue
		}
		if sectionName != "" && (r.SectionName == nil || string(*r.SectionName) != sectionName) {
			continue
		}
		return p.Conditions, true, nil
	}
	return nil, false, nil
}
