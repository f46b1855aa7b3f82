// Package v1beta1 contains the input type for this function.
// +kubebuilder:object:generate=true
// +groupName=inferencegateway.fn.crossplane.io
// +versionName=v1beta1
package v1beta1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
)

// Default ext-proc marker annotations on the Envoy Deployment's pod template.
const (
	// markerConfigHash is written by AI Gateway v1.1.0 whenever the gateway
	// has an effective route (internal/controller/gateway.go at v1.1.0).
	markerConfigHash = "aigateway.envoyproxy.io/extproc-config-hash"

	// markerUUID is written by AI Gateway v1.0.0 (and v1.1.0) when it adds or
	// removes the sidecar (internal/controller/gateway.go, annotateGatewayPods).
	markerUUID = "aigateway.envoyproxy.io/uuid"
)

// This isn't a custom resource, in the sense that we never install its CRD.
// It is a KRM-like object, so we generate a CRD to describe its schema.

// Input tunes the defaults of function-inference-gateway. Every field is
// optional; without an Input the defaults apply.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:categories=crossplane
type Input struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// GatewayNamespace is the namespace on the gateway cluster that holds
	// the Gateway, its EnvoyProxy, the anchor route and the failover policy.
	// +optional
	// +kubebuilder:default=modelplane-system
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	GatewayNamespace string `json:"gatewayNamespace,omitempty"`

	// GatewayName names the Gateway and its EnvoyProxy on the gateway
	// cluster.
	// +optional
	// +kubebuilder:default=inference-gateway
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	GatewayName string `json:"gatewayName,omitempty"`

	// ObjectNamespace is the namespace on the control plane where the
	// provider-kubernetes Objects of a cluster-scoped InferenceGateway live.
	// It is not a namespace on the gateway cluster.
	// +optional
	// +kubebuilder:default=modelplane-system
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ObjectNamespace string `json:"objectNamespace,omitempty"`

	// GatewayClassName is the GatewayClass of the Gateway when the
	// InferenceGateway does not set spec.className.
	// +optional
	// +kubebuilder:default=envoy
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	GatewayClassName string `json:"gatewayClassName,omitempty"`

	// EnvoyGatewayNamespace is the namespace Envoy Gateway runs in, where it
	// creates the Envoy Deployment in its default ControllerNamespace mode.
	// +optional
	// +kubebuilder:default=envoy-gateway-system
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	EnvoyGatewayNamespace string `json:"envoyGatewayNamespace,omitempty"`

	// ExtProcMarkerAnnotations are the pod-template annotations AI Gateway
	// writes when it rolls the ext-proc sidecar into the Envoy Deployment.
	// The rollout counts as carrying the sidecar when any of them is set and
	// non-empty.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=316
	// +kubebuilder:validation:items:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	ExtProcMarkerAnnotations []string `json:"extProcMarkerAnnotations,omitempty"`

	// AnchorHeader is the header the backend-free anchor route matches. It
	// must not be x-ai-eg-model, or AI Gateway lists the anchor as a model.
	// +optional
	AnchorHeader *Header `json:"anchorHeader,omitempty"`

	// InferenceGatewayAPIVersion is the apiVersion a ModelRoute uses to read
	// its InferenceGateway. It defaults to the ModelRoute's own apiVersion.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[a-z0-9]+$`
	InferenceGatewayAPIVersion string `json:"inferenceGatewayAPIVersion,omitempty"`

	// ClusterDomain is the DNS domain of the gateway cluster's Services. A
	// ModelRoute backend whose hostname ends in .svc or .svc.<clusterDomain>
	// is inside the cluster, and by default receives the caller's client
	// ID; any other backend does not.
	// +optional
	// +kubebuilder:default=cluster.local
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ClusterDomain string `json:"clusterDomain,omitempty"`

	// ProviderSanitizesSecrets says that provider-kubernetes runs with
	// --sanitize-secrets, so an observe-only Object on a Secret does not
	// copy the Secret's data into the Object's status. Only then does the
	// function observe AI Gateway's filter-config Secret, which holds the
	// backends' API keys, and only with that evidence does it write its own
	// ext-proc marker on AI Gateway v1.0.0. Leave it false unless the
	// provider has the flag.
	// +optional
	ProviderSanitizesSecrets bool `json:"providerSanitizesSecrets,omitempty"`

	// CircuitBreakerCooldown is how long Crossplane's per-composite circuit
	// breaker stays open once it trips (Crossplane's
	// --circuit-breaker-cooldown). Set it when Crossplane runs with another
	// value than its default.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('-')",message="circuitBreakerCooldown must not be negative"
	CircuitBreakerCooldown *metav1.Duration `json:"circuitBreakerCooldown,omitempty"`
}

// DefaultCircuitBreakerCooldown is Crossplane's default
// --circuit-breaker-cooldown (crossplane v2.2.0 and v2.3.0 cmd/crossplane/core/core.go).
const DefaultCircuitBreakerCooldown = 5 * time.Minute

// Header is an HTTP header name and value.
type Header struct {
	// Name of the header.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+\-.^_\x60|~]+$`
	// +kubebuilder:validation:XValidation:rule="self.lowerAscii() != 'x-ai-eg-model'",message="the anchor must not match x-ai-eg-model, or it is listed in /v1/models"
	Name string `json:"name"`

	// Value of the header.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^[^\x00-\x1f\x7f]+$`
	Value string `json:"value"`
}

// WithDefaults returns a copy of the Input with every unset field set to its
// default. It never changes the receiver.
func (in *Input) WithDefaults() *Input {
	out := &Input{}
	if in != nil {
		out = in.DeepCopy()
	}
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&out.GatewayNamespace, names.DefaultGatewayNamespace)
	def(&out.GatewayName, names.DefaultGatewayName)
	def(&out.ObjectNamespace, names.DefaultObjectNamespace)
	def(&out.GatewayClassName, names.DefaultGatewayClassName)
	def(&out.EnvoyGatewayNamespace, names.DefaultEnvoyGatewayNamespace)
	def(&out.ClusterDomain, names.DefaultClusterDomain)
	if len(out.ExtProcMarkerAnnotations) == 0 {
		out.ExtProcMarkerAnnotations = []string{markerConfigHash, markerUUID}
	}
	if out.CircuitBreakerCooldown == nil {
		out.CircuitBreakerCooldown = &metav1.Duration{Duration: DefaultCircuitBreakerCooldown}
	}
	if out.AnchorHeader == nil {
		out.AnchorHeader = &Header{Name: names.DefaultAnchorHeaderName, Value: names.DefaultAnchorHeaderValue}
	}
	return out
}
