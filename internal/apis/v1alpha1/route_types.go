package v1alpha1

import (
	aigv1b1 "github.com/envoyproxy/ai-gateway/api/v1beta1"
)

// The types under a ModelRoute's spec.backends, each with the defaults and
// bounds of its fields.

// Defaults and bounds of a backend.
const (
	// MaxPriority is the highest priority a backend may ask for.
	MaxPriority = 63
	// MaxWeight is the largest weight, Gateway API's BackendRef limit.
	MaxWeight = 1_000_000

	// DefaultPriority is a backend's priority when unset: the preferred
	// tier.
	DefaultPriority int32 = 0
	// DefaultWeight is a backend's weight within its tier when unset.
	DefaultWeight int32 = 1
	// DefaultPort is a backend's port when unset.
	DefaultPort int32 = 443
	// DefaultTLS is whether a backend is reached with TLS when unset.
	DefaultTLS = true
	// DefaultPrefix is the API prefix for the OpenAI and Anthropic
	// schemas.
	DefaultPrefix = "/v1"
)

// Schemas AI Gateway v1.0.0 knows (api/v1beta1/shared_types.go, APISchema).
var Schemas = []aigv1b1.APISchema{
	aigv1b1.APISchemaOpenAI, aigv1b1.APISchemaAnthropic, aigv1b1.APISchemaAWSBedrock, aigv1b1.APISchemaAzureOpenAI,
	aigv1b1.APISchemaGCPVertexAI, aigv1b1.APISchemaGCPAnthropic, aigv1b1.APISchemaCohere, aigv1b1.APISchemaAWSAnthropic,
}

// CredentialTypes is how each schema's provider takes an API key: OpenAI
// and Cohere as a bearer token (APIKey: Authorization), Anthropic in
// x-api-key (AnthropicAPIKey), Azure OpenAI in api-key (AzureAPIKey)
// (ai-gateway v1.0.0 internal/backendauth: api_key.go, anthropicapikey.go,
// azureapikey.go). AWS and Google schemas take credentials, not keys, and
// are missing on purpose (site/docs/capabilities/llm-integrations/
// supported-providers.md).
var CredentialTypes = map[aigv1b1.APISchema]aigv1b1.BackendSecurityPolicyType{
	aigv1b1.APISchemaOpenAI:      aigv1b1.BackendSecurityPolicyTypeAPIKey,
	aigv1b1.APISchemaCohere:      aigv1b1.BackendSecurityPolicyTypeAPIKey,
	aigv1b1.APISchemaAnthropic:   aigv1b1.BackendSecurityPolicyTypeAnthropicAPIKey,
	aigv1b1.APISchemaAzureOpenAI: aigv1b1.BackendSecurityPolicyTypeAzureAPIKey,
}

// Kinds a CARef may name.
const (
	// CAKindConfigMap is a ConfigMap's ca.crt.
	CAKindConfigMap = "ConfigMap"
	// CAKindSecret is a Secret's ca.crt.
	CAKindSecret = "Secret"
	// DefaultCAKind is caRef.kind when unset.
	DefaultCAKind = CAKindConfigMap
)

// Backend is one upstream that serves the model.
//
// +kubebuilder:validation:XValidation:rule="!has(self.apiKey) || self.schema.name in ['OpenAI', 'Cohere', 'Anthropic', 'AzureOpenAI']",message="apiKey is only for the OpenAI, Cohere, Anthropic and AzureOpenAI schemas: AI Gateway authenticates AWS and Google backends with cloud credentials, not keys"
// +kubebuilder:validation:XValidation:rule="!has(self.apiKey) || !has(self.credentials)",message="set apiKey or credentials, not both"
// +kubebuilder:validation:XValidation:rule="!has(self.credentials) || !has(self.credentials.aws) || self.schema.name in ['AWSBedrock', 'AWSAnthropic']",message="credentials.aws is only for the AWSBedrock and AWSAnthropic schemas"
// +kubebuilder:validation:XValidation:rule="!has(self.credentials) || !has(self.credentials.gcp) || self.schema.name in ['GCPVertexAI', 'GCPAnthropic']",message="credentials.gcp is only for the GCPVertexAI and GCPAnthropic schemas"
// +kubebuilder:validation:XValidation:rule="!has(self.credentials) || !has(self.credentials.azure) || self.schema.name == 'AzureOpenAI'",message="credentials.azure is only for the AzureOpenAI schema"
type Backend struct {
	// A DNS label, unique within the route.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`
	// Where the backend listens.
	Endpoint Endpoint `json:"endpoint"`
	// The API the backend speaks.
	Schema Schema `json:"schema"`
	// The fallback tier. Lower is preferred; tiers are tried in order.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=63
	// +kubebuilder:default=0
	Priority *int32 `json:"priority,omitempty"`
	// The share of traffic within the tier.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +kubebuilder:default=1
	Weight *int32 `json:"weight,omitempty"`
	// The model name this backend is sent instead of the route's.
	// +kubebuilder:validation:MaxLength=4096
	ModelNameOverride string `json:"modelNameOverride,omitempty"`
	// The backend's API key.
	APIKey *APIKey `json:"apiKey,omitempty"`
	// The backend's cloud credentials, for the AWS, Google and Azure
	// schemas: exactly one of aws, gcp and azure, never with apiKey.
	Credentials *Credentials `json:"credentials,omitempty"`

	// ForwardsCaller reads this.

	// Send this backend the authenticated caller's client ID in
	// x-modelplane-caller. Defaults to true only for a backend inside the
	// gateway cluster: no apiKey, and a hostname ending in .svc or
	// .svc.<cluster domain>. Third parties never see who called unless
	// this says so.
	ForwardCallerIdentity *bool `json:"forwardCallerIdentity,omitempty"`
}

// Endpoint is where a backend listens.
//
// +kubebuilder:validation:XValidation:rule="!self.hostname.matches('^[0-9.]+$')",message="endpoint.hostname must be the backend's DNS name, not an IP address: Envoy Gateway builds priority localities only for FQDN endpoints"
// +kubebuilder:validation:XValidation:rule="!has(self.tlsConfig) || !has(self.tls) || self.tls",message="endpoint.tlsConfig needs TLS: remove tls: false, or remove tlsConfig"
type Endpoint struct {
	// The backend's fully qualified DNS name. IP addresses are not
	// accepted.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$`
	Hostname string `json:"hostname,omitempty"`
	// The backend's port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=443
	Port *int32 `json:"port,omitempty"`
	// Connect with TLS, trusting the system CAs unless tlsConfig names
	// the backend's CA.
	// +kubebuilder:default=true
	TLS *bool `json:"tls,omitempty"`

	// tls stays a bool: a structural schema gives a field one type, and
	// every existing ModelRoute writes the bool.

	// How the TLS connection to the backend is verified and
	// authenticated; needs tls.
	TLSConfig *TLSConfig `json:"tlsConfig,omitempty"`
}

// TLSConfig verifies a backend against its own CA, and authenticates the
// gateway to it.
type TLSConfig struct {
	// The backend's CA: a ConfigMap or Secret in the ModelRoute's
	// namespace whose ca.crt holds it, copied to the gateway cluster. The
	// backend is then trusted only by it, not by the system CAs.
	CARef *CARef `json:"caRef,omitempty"`
	// The backend requires the gateway's client certificate: the
	// InferenceGateway must have spec.backendTLS.clientCertificate.
	ClientCertificate bool `json:"clientCertificate,omitempty"`
}

// CARef names a ConfigMap or Secret that holds a CA certificate in ca.crt.
type CARef struct {
	// ConfigMap or Secret.
	// +kubebuilder:validation:Enum=ConfigMap;Secret
	// +kubebuilder:default=ConfigMap
	Kind string `json:"kind,omitempty"`
	// Its name.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name,omitempty"`
}

// Schema is the API a backend speaks.
//
// +kubebuilder:validation:XValidation:rule="!has(self.version) || !(self.name in ['OpenAI', 'AWSBedrock', 'GCPVertexAI', 'Anthropic'])",message="AI Gateway ignores schema.version for OpenAI, AWSBedrock, GCPVertexAI and Anthropic; use schema.prefix for a custom path"
type Schema struct {
	// The API schema, as AI Gateway names it.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:Enum=OpenAI;Anthropic;AWSBedrock;AzureOpenAI;GCPVertexAI;GCPAnthropic;Cohere;AWSAnthropic
	Name string `json:"name,omitempty"`
	// The API path prefix. Defaults to /v1 for OpenAI and Anthropic. A
	// path only: no scheme, host, credentials, query or spaces.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._~!$&'()*+,;=%/-]*$`
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('//')",message="schema.prefix is a path such as /v1, not a URL: remove the leading //"
	Prefix *string `json:"prefix,omitempty"`
	// The API version, for AzureOpenAI.
	// +kubebuilder:validation:MaxLength=64
	Version *string `json:"version,omitempty"`
}

// APIKey points at the backend's API key.
type APIKey struct {
	// A Secret in the ModelRoute's namespace that holds the API key.
	SecretRef SecretRef `json:"secretRef"`
}

// SecretRef names a key of a Secret in the ModelRoute's namespace.
type SecretRef struct {
	// The Secret's name.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name,omitempty"`
	// The key of the Secret's data that holds the API key.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// Keys under which AI Gateway v1.0.0 reads each cloud credential from the
// Secret its BackendSecurityPolicy names (api/v1beta1/
// backendsecurity_policy.go: AWSCredentialsFile, GCPCredentialsFile,
// BackendSecurityPolicyAzureCredentials.ClientSecretRef).
const (
	// APIKeyKey: an API key (internal/controller, apiKeyInSecret).
	APIKeyKey            = "apiKey"
	AWSCredentialsKey    = "credentials"
	GCPCredentialsKey    = "service_account.json"
	AzureClientSecretKey = "client-secret"
	// DefaultAWSProfile is credentials.aws.profile when unset, AI
	// Gateway's default.
	DefaultAWSProfile = "default"
)

// Credentials are a backend's cloud credentials.
//
// +kubebuilder:validation:XValidation:rule="(has(self.aws) ? 1 : 0) + (has(self.gcp) ? 1 : 0) + (has(self.azure) ? 1 : 0) == 1",message="set exactly one of credentials.aws, credentials.gcp and credentials.azure"
type Credentials struct {
	// AWS credentials, for the AWSBedrock and AWSAnthropic schemas: Envoy
	// signs each request with SigV4.
	AWS *AWSCredentials `json:"aws,omitempty"`
	// A GCP service account, for the GCPVertexAI and GCPAnthropic schemas.
	GCP *GCPCredentials `json:"gcp,omitempty"`
	// An Azure service principal, for the AzureOpenAI schema.
	Azure *AzureCredentials `json:"azure,omitempty"`
}

// AWSCredentials sign a backend's requests for AWS.
//
// +kubebuilder:validation:XValidation:rule="!has(self.profile) || has(self.secretRef)",message="credentials.aws.profile needs credentials.aws.secretRef: it names a profile of that credentials file"
type AWSCredentials struct {
	// The AWS region the requests are signed for, such as eu-west-1.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9]+(-[a-z0-9]+)*$`
	Region string `json:"region,omitempty"`
	// A key of a Secret in the ModelRoute's namespace that holds an AWS
	// credentials file. Without it, Envoy's pods sign with the default
	// credential chain of their own identity (IRSA, EKS Pod Identity).
	SecretRef *SecretRef `json:"secretRef,omitempty"`
	// The profile of the credentials file.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._-]+$`
	Profile string `json:"profile,omitempty"`
}

// GCPCredentials authenticate a backend's requests to Google Cloud.
type GCPCredentials struct {
	// The GCP project.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-z0-9][-a-z0-9:.]*$`
	ProjectName string `json:"projectName,omitempty"`
	// The GCP region, such as europe-west4.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9]+(-[a-z0-9]+)*$`
	Region string `json:"region,omitempty"`
	// A key of a Secret in the ModelRoute's namespace that holds a
	// service account's JSON key. Without it, Envoy's pods authenticate
	// with Application Default Credentials, their own identity (GKE
	// Workload Identity through the gateway's spec.envoy.serviceAccount*).
	SecretRef *SecretRef `json:"secretRef,omitempty"`
}

// AzureCredentials authenticate a backend's requests to Azure OpenAI as a
// service principal.
type AzureCredentials struct {
	// The service principal's application (client) ID.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9-]+$`
	ClientID string `json:"clientID,omitempty"`
	// The Entra ID tenant.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9.-]+$`
	TenantID string `json:"tenantID,omitempty"`
	// A key of a Secret in the ModelRoute's namespace that holds the
	// client secret.
	// +kubebuilder:validation:Required
	ClientSecretRef *SecretRef `json:"clientSecretRef,omitempty"`
}

// A CredentialSource is where a backend's credential comes from, and
// where it goes on the gateway cluster.
type CredentialSource struct {
	// Ref is the Secret in the ModelRoute's namespace, and its key.
	Ref SecretRef
	// Key is the key AI Gateway reads in the copy.
	Key string
	// Field is the reference's field under spec.backends[i], and Noun
	// what the Secret holds, for messages.
	Field, Noun string
}

// CredentialSecret is where the backend's credential is copied from, and
// false when it has none to copy (no apiKey, or AWS or GCP credentials
// from the pods' own identity).
func (b Backend) CredentialSecret() (CredentialSource, bool) {
	switch c := b.Credentials; {
	case b.APIKey != nil:
		return CredentialSource{Ref: b.APIKey.SecretRef, Key: APIKeyKey, Field: "apiKey.secretRef", Noun: "API-key"}, true
	case c == nil:
	case c.AWS != nil && c.AWS.SecretRef != nil:
		return CredentialSource{Ref: *c.AWS.SecretRef, Key: AWSCredentialsKey, Field: "credentials.aws.secretRef", Noun: "AWS credentials"}, true
	case c.GCP != nil && c.GCP.SecretRef != nil:
		return CredentialSource{Ref: *c.GCP.SecretRef, Key: GCPCredentialsKey, Field: "credentials.gcp.secretRef", Noun: "GCP service account"}, true
	case c.Azure != nil && c.Azure.ClientSecretRef != nil:
		return CredentialSource{Ref: *c.Azure.ClientSecretRef, Key: AzureClientSecretKey, Field: "credentials.azure.clientSecretRef", Noun: "Azure client secret"}, true
	}
	return CredentialSource{}, false
}

// Authenticated reports whether the backend has an API key or cloud
// credentials, and so a BackendSecurityPolicy.
func (b Backend) Authenticated() bool { return b.APIKey != nil || b.Credentials != nil }

// MaxAccessCallers is the most callers spec.access.callers may list:
// Envoy Gateway takes at most 256 values in an authorization rule's header
// match (gateway v1.8.3 api/v1alpha1/authorization_types.go,
// AuthorizationHeaderMatch.Values MaxItems=256).
const MaxAccessCallers = 256

// Access says which of the InferenceGateway's authenticated callers may
// use the model.
type Access struct {
	// The client IDs that may call the model: data keys of the
	// InferenceGateway's callers' Secrets, each once. Every other caller,
	// authenticated or not, is refused: 401 without a valid key, 403 with
	// one.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[-._a-zA-Z0-9]+$`
	// +listType=set
	Callers []string `json:"callers,omitempty"`
}
