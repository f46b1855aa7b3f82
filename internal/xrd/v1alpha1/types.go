// Package v1alpha1 holds the two composite resources' root types, from
// which internal/xrd generates the XRDs: their names, scope and printer
// columns are the markers here, their spec and status schemas are the
// markers and doc comments of internal/gateway's and internal/route's Spec
// and Status. Nothing else uses these types.
//
// +groupName=modelplane.ai
// +versionName=v1alpha1
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/route"
)

// An InferenceGateway is an Envoy AI Gateway on one gateway cluster. One
// gateway per cluster, like upstream Modelplane, so it is cluster-scoped.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ig
// +kubebuilder:printcolumn:name="GATEWAY-READY",type=string,JSONPath=`.status.conditions[?(@.type=='GatewayReady')].status`
// +kubebuilder:printcolumn:name="REASON",type=string,JSONPath=`.status.conditions[?(@.type=='GatewayReady')].reason`
// +kubebuilder:printcolumn:name="ADDRESS",type=string,JSONPath=`.status.address`
type InferenceGateway struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// The gateway: its cluster, its Envoy pods, TLS, callers and failover.
	// +optional
	Spec gateway.Spec `json:"spec,omitempty"`
	// What the function observed of the gateway; Crossplane adds the
	// conditions, among them GatewayReady.
	// +optional
	Status gateway.Status `json:"status,omitempty"`
}

// A ModelRoute serves one model name through an InferenceGateway, from
// backends in priority tiers.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=mrt
// +kubebuilder:printcolumn:name="MODEL",type=string,JSONPath=`.status.model`
// +kubebuilder:printcolumn:name="ROUTING-READY",type=string,JSONPath=`.status.conditions[?(@.type=='RoutingReady')].status`
// +kubebuilder:printcolumn:name="REASON",type=string,JSONPath=`.status.conditions[?(@.type=='RoutingReady')].reason`
// +kubebuilder:printcolumn:name="USABLE",type=integer,JSONPath=`.status.backends.usable`
type ModelRoute struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// The model: its name, the gateway that serves it and its backends.
	// +optional
	Spec route.Spec `json:"spec,omitempty"`
	// What the function observed of the route; Crossplane adds the
	// conditions, among them RoutingReady.
	// +optional
	Status route.Status `json:"status,omitempty"`
}
