package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindModelRoute is the ModelRoute's kind.
const KindModelRoute = "ModelRoute"

// A ModelRoute serves one model name through an InferenceGateway, from
// backends in priority tiers.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=mrt
// +kubebuilder:printcolumn:name="MODEL",type=string,JSONPath=`.status.model`
// +kubebuilder:printcolumn:name="ROUTING-READY",type=string,JSONPath=`.status.conditions[?(@.type=='RoutingReady')].status`
// +kubebuilder:printcolumn:name="REASON",type=string,JSONPath=`.status.conditions[?(@.type=='RoutingReady')].reason`
// +kubebuilder:printcolumn:name="USABLE",type=integer,JSONPath=`.status.backends.usable`
// +kubebuilder:printcolumn:name="ROUTED",type=string,JSONPath=`.status.routed`
type ModelRoute struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// The model: its name, the gateway that serves it and its backends.
	// +optional
	Spec ModelRouteSpec `json:"spec,omitempty"`
	// What the function observed of the route; Crossplane adds the
	// conditions, among them RoutingReady.
	// +optional
	Status ModelRouteStatus `json:"status,omitempty"`
}

// MaxBackends is the most backends a model can be served by. The
// AIGatewayRoute takes 128 backendRefs in a rule, but AI Gateway copies
// every backendRef of a rule into one rule of the HTTPRoute it generates
// (ai-gateway v1.0.0 internal/controller/ai_gateway_route.go,
// newHTTPRoute), and Gateway API caps an HTTPRoute rule at 16
// (sigs.k8s.io/gateway-api v1.5.1 apis/v1/httproute_types.go,
// HTTPRouteRule.BackendRefs MaxItems=16). A 17th backend makes the
// generated HTTPRoute invalid, and the model is never served.
const MaxBackends = 16

// DefaultRequestTimeout is spec.timeouts.request when unset.
const DefaultRequestTimeout = "600s"

// ModelRouteSpec is the spec of a ModelRoute.
//
// The doc comments of ModelRouteSpec, ModelRouteStatus and the types under
// them are the ModelRoute XRD's field descriptions, and their markers its
// schema: internal/xrd generates package/configuration/route/xrd.yaml from
// them. The API server enforces the markers; Validate checks again what the
// schema cannot say, and what crossplane render (which does not validate an
// XR against its XRD) would otherwise let through.
//
// +kubebuilder:validation:XValidation:rule="has(self.gatewayName) != has(self.gatewaySelector)",message="set exactly one of spec.gatewayName (one InferenceGateway) and spec.gatewaySelector (every InferenceGateway whose labels match)"
type ModelRouteSpec struct {
	// The InferenceGateway that serves this model. Exactly one of
	// gatewayName and gatewaySelector is set.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	GatewayName string `json:"gatewayName,omitempty"`
	// The InferenceGateways that serve this model: every one whose labels
	// match, each on its own cluster, composed there as a route with
	// gatewayName would be. Exactly one of gatewayName and gatewaySelector
	// is set.
	GatewaySelector *GatewaySelector `json:"gatewaySelector,omitempty"`
	// The model name callers send. Defaults to <namespace>/<name>. A name
	// of the form <namespace>/<model> must start with this ModelRoute's
	// namespace; one that starts with no namespace (gpt-4o) only if the
	// InferenceGateway lists this namespace in
	// spec.modelNames.unprefixedNamespaces.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^[!-~]([ -~]*[!-~])?$`
	Model string `json:"model,omitempty"`
	// The backends that serve the model, in priority (fallback) tiers. At
	// most 16: AI Gateway puts every backend into one rule of the HTTPRoute
	// it generates, and Gateway API allows 16 backendRefs in a rule.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	Backends []Backend `json:"backends,omitempty"`
	// The request's timeouts.
	Timeouts *Timeouts `json:"timeouts,omitempty"`
	// Which callers may use the model. Without it, every caller the
	// InferenceGateway authenticates may; with it, only those listed, and
	// the InferenceGateway must have spec.auth.
	Access *Access `json:"access,omitempty"`
}

// Timeouts of a request.
type Timeouts struct {
	// The whole request's timeout, a Gateway API duration.
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(h|m|s|ms)){1,4}$`
	// +kubebuilder:default="600s"
	Request string `json:"request,omitempty"`
}

// ModelRouteStatus is what the function writes into a ModelRoute's status.
type ModelRouteStatus struct {
	// The model name callers send.
	// +optional
	Model string `json:"model,omitempty"`
	// The gateway's address.
	// +optional
	Address string `json:"address,omitempty"`
	// How many backends are usable, in all and in each tier.
	// +optional
	Backends *BackendsStatus `json:"backends,omitempty"`

	// compose.NotReadySince reads this for the requeue's back-off.

	// When RoutingReady last turned False, or took another reason while
	// False; absent while it is True. The function backs off its requeue
	// from it.
	// +optional
	NotReadySince *metav1.Time `json:"notReadySince,omitempty"`

	// The InferenceGateway verdict RoutingReady last followed. A reconcile
	// that reads an older one read a copy that has not caught up.
	// +optional
	FollowedGateway *FollowedGateway `json:"followedGateway,omitempty"`

	// With spec.gatewaySelector: how many of the InferenceGateways that
	// serve a cluster route the model, of how many the selector matches,
	// such as 2/2.
	// +optional
	Routed string `json:"routed,omitempty"`
	// With spec.gatewaySelector: each InferenceGateway the selector
	// matches, and whether it routes the model.
	// +optional
	// +listType=map
	// +listMapKey=name
	Gateways []GatewayRouting `json:"gateways,omitempty"`
}

// GatewayRouting is how one InferenceGateway a ModelRoute's
// spec.gatewaySelector matches serves the model.
type GatewayRouting struct {
	// The InferenceGateway's name.
	Name string `json:"name"`
	// Its cluster: the providerConfigName its objects are composed with.
	// +optional
	Cluster string `json:"cluster,omitempty"`
	// Its address.
	// +optional
	Address string `json:"address,omitempty"`
	// Whether it routes the model: what RoutingReady would say of a route
	// with gatewayName set to it.
	Routes bool `json:"routes"`
	// RoutingReady's reason for this gateway.
	// +optional
	Reason string `json:"reason,omitempty"`
	// RoutingReady's message for this gateway: why it routes the model,
	// or why not.
	// +optional
	Message string `json:"message,omitempty"`
	// When routing through this gateway last stopped, or took another
	// reason while stopped.
	// +optional
	NotReadySince *metav1.Time `json:"notReadySince,omitempty"`
	// The gateway's verdict this route last followed.
	// +optional
	FollowedGateway *FollowedGateway `json:"followedGateway,omitempty"`
}

// GatewaySelector selects InferenceGateways by their labels, as a
// Kubernetes label selector does; it must say something, so that a
// selector left empty by mistake never takes in every gateway.
//
// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="spec.gatewaySelector selects nothing: set matchLabels or matchExpressions"
type GatewaySelector struct {
	// Labels an InferenceGateway must have, with these values.
	// +kubebuilder:validation:MaxProperties=64
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	// Requirements on an InferenceGateway's labels; all must hold.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	MatchExpressions []GatewaySelectorRequirement `json:"matchExpressions,omitempty"`
}

// GatewaySelectorRequirement is one requirement on a label.
type GatewaySelectorRequirement struct {
	// The label's key.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`
	// How the label's value relates to values.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	Operator string `json:"operator"`
	// The values, for In and NotIn; none for Exists and DoesNotExist.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	Values []string `json:"values,omitempty"`
}

// FollowedGateway is the GatewayReady verdict a ModelRoute last followed:
// which InferenceGateway, whether it was ready, and since when.
type FollowedGateway struct {
	// The InferenceGateway's name.
	Name string `json:"name"`
	// The InferenceGateway's uid: a recreated gateway starts a new history.
	// +optional
	UID string `json:"uid,omitempty"`
	// Whether it was GatewayReady.
	Ready bool `json:"ready"`
	// The lastTransitionTime of its GatewayReady condition.
	Since metav1.Time `json:"since"`
}

// BackendsStatus counts the backends.
type BackendsStatus struct {
	// How many backends the route has.
	// +optional
	Total int `json:"total"`
	// How many of them can serve.
	// +optional
	Usable int `json:"usable"`
	// The usable backends of each tier.
	// +optional
	Tiers []TierStatus `json:"tiers,omitempty"`
}

// TierStatus counts the usable backends of one tier.
type TierStatus struct {
	// The priority Envoy sees, renumbered densely from 0.
	// +optional
	Tier int `json:"tier"`
	// The priority the spec asked for.
	// +optional
	Priority int32 `json:"priority"`
	// How many usable backends the tier has.
	// +optional
	Backends int `json:"backends"`
}
