package route

import (
	"fmt"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
)

// ConditionType is the condition this package reports on a ModelRoute.
const ConditionType = "RoutingReady"

// Reasons for RoutingReady, in the order the user must act on them.
const (
	// ReasonAccepted: the gateway is ready, AI Gateway accepted the route
	// and Envoy Gateway accepted and resolved the HTTPRoute it generated.
	ReasonAccepted = "RouteAccepted"
	// ReasonWaitingForGateway: the InferenceGateway is missing or not
	// GatewayReady.
	ReasonWaitingForGateway = "WaitingForGateway"
	// ReasonGatewayNotReporting: the InferenceGateway's GatewayReady is
	// Unknown or missing: its last reconcile failed before it could report
	// (a Fatal result, or its function could not be called).
	ReasonGatewayNotReporting = "GatewayNotReporting"
	// ReasonGatewayLostCluster: the InferenceGateway composes nothing on its
	// cluster, which another InferenceGateway serves
	// (gateway.ReasonClusterAlreadyHasGateway).
	ReasonGatewayLostCluster = "GatewayLostCluster"
	// ReasonGatewayStatusStale: the InferenceGateway's GatewayReady and the
	// gateway-status ConfigMap the ModelRoute observes disagree, so one of
	// them is behind.
	ReasonGatewayStatusStale = "GatewayStatusStale"
	// ReasonNoUsableBackends: no backend can be used; every one lacks its
	// API key.
	ReasonNoUsableBackends = "NoUsableBackends"
	// ReasonWaitingForCredentials: a backend's API key has not reached the
	// gateway cluster yet, so the backend is not in the route yet.
	ReasonWaitingForCredentials = "WaitingForCredentials"
	// ReasonWaitingForBackends: a backend not in the route yet waits for
	// its Backend and AIServiceBackend to exist on the gateway cluster
	// before it joins the route (readBackends says why).
	ReasonWaitingForBackends = "WaitingForBackends"
	// ReasonWaitingForRoute: AI Gateway has not accepted the route yet.
	ReasonWaitingForRoute = "WaitingForRoute"
	// ReasonHTTPRouteNotAccepted: Envoy Gateway has not accepted the
	// HTTPRoute AI Gateway generated, or cannot resolve its backends.
	ReasonHTTPRouteNotAccepted = "HTTPRouteNotAccepted"
	// ReasonWaitingForAccessPolicy: Envoy Gateway has not judged the
	// SecurityPolicy that restricts the model to spec.access.callers yet.
	ReasonWaitingForAccessPolicy = "WaitingForAccessPolicy"
	// ReasonAccessPolicyNotAccepted: Envoy Gateway refuses that
	// SecurityPolicy, or does not merge it into the gateway's caller
	// authentication, so spec.access is not enforced as written.
	ReasonAccessPolicyNotAccepted = "AccessPolicyNotAccepted"
	// ReasonAccessNotEnforceable: spec.access is set, and the
	// InferenceGateway does not authenticate callers. Nothing new is
	// composed, and nothing composed is dropped (accessRefusal).
	ReasonAccessNotEnforceable = "AccessNotEnforceable"
	// ReasonModelNameRefused: spec.model is in another namespace's space
	// of model names, or starts with no namespace on a gateway that does
	// not grant such names to the route's namespace
	// (v1alpha1.ModelRefusal). The model's AIGatewayRoute is not composed.
	ReasonModelNameRefused = "ModelNameRefused"
)

// routingReady is the ModelRoute's RoutingReady condition: False with the
// reason of its first problem, or True with how the model routes.
func routingReady(p *compose.Problems, model string, usable, total, tiers int) compose.Condition {
	return p.Condition(ConditionType, ReasonAccepted, fmt.Sprintf("model %q routes to %d of %d backends in %d priority tiers", model, usable, total, tiers))
}
