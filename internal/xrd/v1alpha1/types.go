// Package v1alpha1 holds the ModelRoute's root type until it moves to
// internal/apis/v1alpha1, which holds the InferenceGateway's: internal/xrd
// generates the XRDs from both.
//
// +groupName=modelplane.ai
// +versionName=v1alpha1
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/route"
)

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
