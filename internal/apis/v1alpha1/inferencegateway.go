package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindInferenceGateway is the InferenceGateway's kind.
const KindInferenceGateway = "InferenceGateway"

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
	Spec InferenceGatewaySpec `json:"spec,omitempty"`
	// What the function observed of the gateway; Crossplane adds the
	// conditions, among them GatewayReady.
	// +optional
	Status InferenceGatewayStatus `json:"status,omitempty"`
}

// DefaultReplicas is how many Envoy replicas run when spec.replicas is
// unset. Two, so that one can be drained or evicted (the PDB allows one
// unavailable) while the other serves.
const DefaultReplicas int32 = 2

// MaxReplicas is the most Envoy replicas spec.replicas may ask for (its
// +kubebuilder:validation:Maximum).
const MaxReplicas int32 = 100

// InferenceGatewaySpec is the spec of an InferenceGateway.
//
// The doc comments of InferenceGatewaySpec, InferenceGatewayStatus and the
// types under them are the InferenceGateway XRD's field descriptions, and
// their markers its schema: internal/xrd generates
// package/configuration/gateway/xrd.yaml from them. The API server enforces
// the markers; Validate checks again what the schema cannot say, and what
// crossplane render (which does not validate an XR against its XRD) would
// otherwise let through.
//
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || has(self.hostname)",message="spec.tls needs spec.hostname: set the hostname the certificate is for"
// +kubebuilder:validation:XValidation:rule="!has(self.budgets) || size(self.budgets) == 0 || has(self.auth)",message="spec.budgets needs spec.auth, since budgets are kept per authenticated caller: set spec.auth.apiKey.secretSelector, or remove spec.budgets"
type InferenceGatewaySpec struct {
	// The provider-kubernetes ClusterProviderConfig that reaches the
	// gateway's cluster. Immutable: the gateway's objects there have fixed
	// names, and its claim on the cluster is kept in its status.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.providerConfigName is immutable: to serve another cluster, create another InferenceGateway with that providerConfigName (and delete this one once it is no longer needed)"
	ProviderConfigName string `json:"providerConfigName,omitempty"`

	// Envoy replicas. Two lets one pod be drained while the other serves.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=2
	Replicas *int32 `json:"replicas,omitempty"`

	// The GatewayClass. Defaults to the function Input's gatewayClassName
	// (envoy).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ClassName string `json:"className,omitempty"`

	// The hostname the gateway serves, used by the https listener and the
	// endpoint URLs.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Hostname string `json:"hostname,omitempty"`

	// Terminate TLS on an https listener on port 443.
	TLS *TLS `json:"tls,omitempty"`

	// The gateway's client connections.
	Connection *Connection `json:"connection,omitempty"`

	// How a request fails over from one priority tier to the next.
	Failover *Failover `json:"failover,omitempty"`

	// Makes every caller present an API key. The selected Secrets, in the
	// function Input's objectNamespace on the control plane, hold one
	// caller per data entry: the client ID as the key, its API key as the
	// value. Without auth the gateway is open to anyone who can reach it.
	Auth *Auth `json:"auth,omitempty"`

	// Token budgets per caller: how many input, output or total tokens
	// each authenticated caller may spend per minute, hour, day or month,
	// on each model or across all. Needs auth, and global rate limiting
	// (a Redis) in Envoy Gateway's configuration. A caller over its budget
	// gets 429 until the window ends; the request that crosses the budget
	// still succeeds, since it is charged after its response.
	// +kubebuilder:validation:MaxItems=8
	Budgets []Budget `json:"budgets,omitempty"`

	// The Envoy pods, tuned for long-lived streaming traffic. Each setting
	// changes the pod template, so changing one rolls Envoy; GatewayReady
	// is False until the rollout is done, and every model stays composed.
	Envoy *Envoy `json:"envoy,omitempty"`

	// TLS to the backends: the client certificate the gateway presents to
	// a backend that asks for one.
	BackendTLS *BackendTLS `json:"backendTLS,omitempty"`

	// Who may serve which model names. A name of the form
	// <namespace>/<model> belongs to that namespace's ModelRoutes alone;
	// a name that starts with no namespace (gpt-4o) only to the
	// namespaces listed here.
	ModelNames *ModelNames `json:"modelNames,omitempty"`
}

// InferenceGatewayStatus is what the function writes into an
// InferenceGateway's status.
type InferenceGatewayStatus struct {
	// The gateway's address, as Envoy Gateway reports it.
	// +optional
	Address string `json:"address,omitempty"`
	// Base URLs for OpenAI and Anthropic SDKs.
	// +optional
	Endpoints *Endpoints `json:"endpoints,omitempty"`
	// The Envoy Deployment's rollout counters, as last observed.
	// +optional
	Rollout *Rollout `json:"rollout,omitempty"`
	// Whether callers must authenticate, and the Secrets in use.
	// +optional
	Auth *AuthStatus `json:"auth,omitempty"`
	// The function's record of the Envoy rollout it may write its own
	// ext-proc marker for (AI Gateway v1.0.0), while it waits: when the
	// rollout completed, by the gateway cluster's Deployment controller,
	// and when the function first saw it with every other condition met,
	// by the function's clock.
	// +optional
	ExtProcMarker *MarkerStatus `json:"extProcMarker,omitempty"`

	// compose.NotReadySince reads this for the requeue's back-off.

	// When GatewayReady last turned False; absent while it is True. The
	// function backs off its requeue from it.
	// +optional
	NotReadySince *metav1.Time `json:"notReadySince,omitempty"`

	// internal/gateway's Winner says how a gateway claims its cluster with
	// this.

	// The InferenceGateway this one saw compose the gateway on its
	// cluster: its own name once it has, which keeps the cluster its own
	// (one gateway per cluster).
	// +optional
	ClusterGateway string `json:"clusterGateway,omitempty"`

	// The gateway's client certificate.
	// +optional
	BackendTLS *BackendTLSStatus `json:"backendTLS,omitempty"`
}

// BackendTLSStatus is what backends need to trust the gateway.
type BackendTLSStatus struct {
	// The PEM certificate of the CA that issues the gateway's client
	// certificate, for backends to trust; only with caSecretRef (the
	// function reads no issuer's CA from the gateway cluster).
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	CACertificate string `json:"caCertificate,omitempty"`
	// The Secret in the gateway namespace on the gateway cluster that
	// holds the client certificate and key.
	// +optional
	SecretName string `json:"secretName,omitempty"`
}

// Endpoints are the base URLs clients configure in their SDKs.
type Endpoints struct {
	// The base URL for OpenAI SDKs.
	// +optional
	OpenAI string `json:"openAI,omitempty"`
	// The base URL for Anthropic SDKs.
	// +optional
	Anthropic string `json:"anthropic,omitempty"`
}

// Rollout holds the Envoy Deployment's counters as last observed.
type Rollout struct {
	// +optional
	Generation int64 `json:"generation"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration"`
	// +optional
	Replicas int32 `json:"replicas"`
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas"`
	// +optional
	AvailableReplicas int32 `json:"availableReplicas"`
}

// MarkerStatus is the function's record, in the InferenceGateway's status,
// of the rollout it may write its own ext-proc marker for
// (internal/gatewayready marker.go says why and when).
type MarkerStatus struct {
	// It is also the value of the marker the function writes for that
	// rollout, so that two reconciles never write two values, each of
	// which would roll Envoy.

	// When the Envoy Deployment's rollout completed, as the Deployment
	// controller recorded it: its Progressing condition's lastUpdateTime,
	// on the gateway cluster's clock.
	// +optional
	RolloutCompleted string `json:"rolloutCompleted"`
	// When the function first saw that rollout complete with every other
	// condition for its marker met, on its own clock.
	// +optional
	FirstSeen string `json:"firstSeen"`
}

// AuthStatus is what the gateway reports of caller authentication.
type AuthStatus struct {
	// APIKey, or None when the gateway is open to every caller.
	// +optional
	Method string `json:"method"`
	// The control-plane Secrets whose callers Envoy checks.
	// +optional
	Secrets []string `json:"secrets,omitempty"`
	// How many client IDs those Secrets hold.
	// +optional
	Clients int `json:"clients,omitempty"`
	// The client IDs those Secrets hold, sorted: their data keys, never
	// their values. A ModelRoute's spec.access names callers from them.
	// +optional
	// +listType=set
	ClientIDs []string `json:"clientIDs,omitempty"`
}
