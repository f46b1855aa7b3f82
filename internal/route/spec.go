// Package route composes a ModelRoute: the model's AIGatewayRoute, with its
// backends in priority (fallback) tiers and weights, and each backend's
// Envoy Gateway Backend, AIServiceBackend and credentials, all on the
// gateway's cluster.
package route

import (
	"fmt"
	"net"
	"regexp"
	"strings"

	aigv1b1 "github.com/envoyproxy/ai-gateway/api/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/crossplane/function-sdk-go/errors"

	"github.com/modelplaneai/function-inference-gateway/internal/decode"
)

// Kind is the composite kind this package composes.
const Kind = "ModelRoute"

// Limits and defaults of a ModelRoute spec.
const (
	// MaxBackends is the most backends a model can be served by. The
	// AIGatewayRoute takes 128 backendRefs in a rule, but AI Gateway copies
	// every backendRef of a rule into one rule of the HTTPRoute it
	// generates (ai-gateway v1.0.0 internal/controller/ai_gateway_route.go,
	// newHTTPRoute), and Gateway API caps an HTTPRoute rule at 16
	// (sigs.k8s.io/gateway-api v1.5.1 apis/v1/httproute_types.go,
	// HTTPRouteRule.BackendRefs MaxItems=16). A 17th backend makes the
	// generated HTTPRoute invalid, and the model is never served.
	MaxBackends = 16
	// maxPriority is the highest priority a backend may ask for.
	maxPriority = 63
	// maxWeight is the largest weight, Gateway API's BackendRef limit.
	maxWeight = 1_000_000

	defaultPort           int32 = 443
	defaultWeight         int32 = 1
	defaultRequestTimeout       = "600s"
	// defaultPrefix is the API prefix for the OpenAI and Anthropic schemas.
	defaultPrefix = "/v1"
)

// Schemas AI Gateway v1.0.0 knows (api/v1beta1/shared_types.go, APISchema).
var schemas = []aigv1b1.APISchema{
	aigv1b1.APISchemaOpenAI, aigv1b1.APISchemaAnthropic, aigv1b1.APISchemaAWSBedrock, aigv1b1.APISchemaAzureOpenAI,
	aigv1b1.APISchemaGCPVertexAI, aigv1b1.APISchemaGCPAnthropic, aigv1b1.APISchemaCohere, aigv1b1.APISchemaAWSAnthropic,
}

// durationRE is Gateway API's Duration pattern (apis/v1/shared_types.go).
var durationRE = regexp.MustCompile(`^([0-9]{1,5}(h|m|s|ms)){1,4}$`)

// Spec is the spec of a ModelRoute.
//
// The doc comments of Spec, Status and the types under them are the
// ModelRoute XRD's field descriptions, and their markers its schema:
// internal/xrd generates package/configuration/route/xrd.yaml from them.
// The API server enforces the markers; validate checks again what the
// schema cannot say, and what crossplane render (which does not validate an
// XR against its XRD) would otherwise let through.
type Spec struct {
	// The InferenceGateway that serves this model.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	GatewayName string `json:"gatewayName,omitempty"`
	// The model name callers send. Defaults to <namespace>/<name>.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
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
}

// Backend is one upstream that serves the model.
//
// +kubebuilder:validation:XValidation:rule="!has(self.apiKey) || self.schema.name in ['OpenAI', 'Cohere', 'Anthropic', 'AzureOpenAI']",message="apiKey is only for the OpenAI, Cohere, Anthropic and AzureOpenAI schemas: AI Gateway authenticates AWS and Google backends with cloud credentials, not keys"
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
	// The API path prefix. Defaults to /v1 for OpenAI and Anthropic.
	// +kubebuilder:validation:MaxLength=1024
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

// Timeouts of a request.
type Timeouts struct {
	// The whole request's timeout, a Gateway API duration.
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(h|m|s|ms)){1,4}$`
	// +kubebuilder:default="600s"
	Request string `json:"request,omitempty"`
}

// Status is what the function writes into a ModelRoute's status.
type Status struct {
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

// ReadSpec decodes and checks a ModelRoute's spec. Every problem is an error
// that names the field; the caller makes it Fatal, which leaves everything
// composed in place.
func ReadSpec(xr map[string]any) (*Spec, error) {
	s := &Spec{}
	if err := decode.Strict("ModelRoute", "spec", xr["spec"], s, decode.CrossplaneSpecField); err != nil {
		return nil, err
	}
	err := s.validate()
	return s, err
}

func (s *Spec) validate() error {
	bad := func(format string, a ...any) error {
		return errors.Errorf("cannot compose ModelRoute: "+format, a...)
	}
	if s.GatewayName == "" {
		return bad("spec.gatewayName is required; name the InferenceGateway that serves this model")
	}
	if len(s.Model) > 4096 {
		return bad("spec.model is %d characters; AI Gateway matches at most 4096", len(s.Model))
	}
	if len(s.Backends) == 0 {
		return bad("spec.backends is empty; list at least one backend")
	}
	if len(s.Backends) > MaxBackends {
		return bad("spec.backends has %d entries; at most %d can be served, because AI Gateway puts every backend of a model into one HTTPRoute rule and Gateway API allows 16 backendRefs in a rule (gateway-api apis/v1/httproute_types.go); remove backends or serve them under another model name", len(s.Backends), MaxBackends)
	}
	seen := map[string]int{}
	for i, b := range s.Backends {
		f := fmt.Sprintf("spec.backends[%d]", i)
		if errs := validation.IsDNS1123Label(b.Name); len(errs) > 0 {
			return bad("%s.name %q is not a DNS label (%s)", f, b.Name, strings.Join(errs, "; "))
		}
		if j, dup := seen[b.Name]; dup {
			return bad("%s.name %q is also the name of spec.backends[%d]; backend names must be unique", f, b.Name, j)
		}
		seen[b.Name] = i
		if err := b.validate(f); err != nil {
			return bad("%s", err.Error())
		}
	}
	if s.Timeouts != nil && s.Timeouts.Request != "" && !durationRE.MatchString(s.Timeouts.Request) {
		return bad("spec.timeouts.request %q is not a Gateway API duration; use a form such as 600s, 10m or 1h30m", s.Timeouts.Request)
	}
	return nil
}

func (b Backend) validate(f string) error {
	for _, check := range []func(string) error{b.validateEndpoint, b.validateSchema, b.validateTier, b.validateAPIKey} {
		if err := check(f); err != nil {
			return err
		}
	}
	return nil
}

func (b Backend) validateEndpoint(f string) error {
	h := b.Endpoint.Hostname
	// Envoy Gateway emits one STRICT_DNS cluster with per-priority
	// localities for FQDN endpoints, where AI Gateway writes the tiers. An
	// IP makes an EDS cluster instead (envoyproxy/gateway v1.8.1
	// internal/xds/translator/cluster.go, buildEndpointType), whose
	// endpoints AI Gateway never sees (ai-gateway v1.0.0
	// internal/extensionserver/post_translate_modify.go, maybeModifyCluster
	// reads only an inline load assignment); an IP next to a DNS name makes
	// the rule need a cluster per backend (internal/ir/xds.go,
	// RouteDestination.HasMixedEndpoints), a weighted split across the
	// tiers.
	if net.ParseIP(h) != nil {
		return errors.Errorf("%s.endpoint.hostname %q is an IP address; use the backend's DNS name (for a Service, <service>.<namespace>.svc.cluster.local): Envoy Gateway routes IP endpoints in a way on which AI Gateway cannot set priority tiers, so the model's traffic would be split across all its tiers instead of failing over", f, h)
	}
	if errs := validation.IsDNS1123Subdomain(h); len(errs) > 0 || !strings.Contains(h, ".") {
		return errors.Errorf("%s.endpoint.hostname %q is not a fully qualified DNS name such as api.openai.com", f, h)
	}
	if p := b.Endpoint.Port; p != nil && (*p < 1 || *p > 65535) {
		return errors.Errorf("%s.endpoint.port is %d; use 1 to 65535", f, *p)
	}
	if c := b.Endpoint.TLSConfig; c != nil {
		if !b.tls() {
			return errors.Errorf("%s.endpoint.tlsConfig is set with tls: false; remove tls: false to connect with TLS, or remove tlsConfig", f)
		}
		if r := c.CARef; r != nil {
			if r.Kind != "" && r.Kind != caKindConfigMap && r.Kind != caKindSecret {
				return errors.Errorf("%s.endpoint.tlsConfig.caRef.kind is %q; set ConfigMap or Secret", f, r.Kind)
			}
			if errs := validation.IsDNS1123Subdomain(r.Name); len(errs) > 0 {
				return errors.Errorf("%s.endpoint.tlsConfig.caRef.name %q is not a %s name", f, r.Name, r.kind())
			}
		}
	}
	return nil
}

func (b Backend) validateSchema(f string) error {
	known := false
	for _, s := range schemas {
		known = known || string(s) == b.Schema.Name
	}
	if !known {
		return errors.Errorf("%s.schema.name %q is not a schema AI Gateway knows; use one of %v", f, b.Schema.Name, schemas)
	}
	return nil
}

func (b Backend) validateTier(f string) error {
	if p := b.Priority; p != nil && (*p < 0 || *p > maxPriority) {
		return errors.Errorf("%s.priority is %d; use 0 (preferred) to %d", f, *p, maxPriority)
	}
	if w := b.Weight; w != nil && (*w < 1 || *w > maxWeight) {
		return errors.Errorf("%s.weight is %d; use 1 to %d", f, *w, maxWeight)
	}
	return nil
}

func (b Backend) validateAPIKey(f string) error {
	if k := b.APIKey; k != nil {
		if _, ok := credentialTypes[aigv1b1.APISchema(b.Schema.Name)]; !ok {
			return errors.Errorf("%s.apiKey is set, but the %s schema takes no API key: AI Gateway signs AWS requests with AWS credentials and Google requests with GCP credentials (ai-gateway v1.0.0 internal/backendauth), which this function does not compose; remove apiKey, or use an OpenAI-compatible endpoint that takes a key", f, b.Schema.Name)
		}
		if errs := validation.IsDNS1123Subdomain(k.SecretRef.Name); len(errs) > 0 {
			return errors.Errorf("%s.apiKey.secretRef.name %q is not a Secret name", f, k.SecretRef.Name)
		}
		if errs := validation.IsConfigMapKey(k.SecretRef.Key); len(errs) > 0 {
			return errors.Errorf("%s.apiKey.secretRef.key %q is not a Secret key (%s)", f, k.SecretRef.Key, strings.Join(errs, "; "))
		}
	}
	return nil
}

// model is the name callers send: spec.model, or <namespace>/<name>.
func (s *Spec) model(ns, name string) string {
	if s.Model != "" {
		return s.Model
	}
	return ns + "/" + name
}

func (s *Spec) requestTimeout() string {
	if s.Timeouts != nil && s.Timeouts.Request != "" {
		return s.Timeouts.Request
	}
	return defaultRequestTimeout
}

// forwardsCaller reports whether the backend receives the caller's client
// ID: spec.backends[].forwardCallerIdentity, or by default only a backend
// inside the gateway cluster, one without an API key whose hostname is a
// Service's (<svc>.<ns>.svc or <svc>.<ns>.svc.<clusterDomain>). A backend
// with an API key is a third party's, who has no business knowing who
// inside the company called.
func (b Backend) forwardsCaller(clusterDomain string) bool {
	if b.ForwardCallerIdentity != nil {
		return *b.ForwardCallerIdentity
	}
	h := b.Endpoint.Hostname
	return b.APIKey == nil && (strings.HasSuffix(h, ".svc") || strings.HasSuffix(h, ".svc."+clusterDomain))
}

func (b Backend) port() int32 {
	if b.Endpoint.Port == nil {
		return defaultPort
	}
	return *b.Endpoint.Port
}

func (b Backend) tls() bool { return b.Endpoint.TLS == nil || *b.Endpoint.TLS }

// Kinds a CARef may name.
const (
	caKindConfigMap = "ConfigMap"
	caKindSecret    = "Secret"
)

// kind is the CARef's kind, defaulted.
func (r CARef) kind() string {
	if r.Kind == "" {
		return caKindConfigMap
	}
	return r.Kind
}

// caRef is the backend's CA, or nil for the system CAs.
func (b Backend) caRef() *CARef {
	if !b.tls() || b.Endpoint.TLSConfig == nil {
		return nil
	}
	return b.Endpoint.TLSConfig.CARef
}

// wantsClientCert reports whether the backend needs the gateway's client
// certificate.
func (b Backend) wantsClientCert() bool {
	return b.tls() && b.Endpoint.TLSConfig != nil && b.Endpoint.TLSConfig.ClientCertificate
}

func (b Backend) priority() int32 {
	if b.Priority == nil {
		return 0
	}
	return *b.Priority
}

func (b Backend) weight() int32 {
	if b.Weight == nil {
		return defaultWeight
	}
	return *b.Weight
}

func (b Backend) prefix() *string {
	if b.Schema.Prefix != nil {
		return b.Schema.Prefix
	}
	switch aigv1b1.APISchema(b.Schema.Name) {
	case aigv1b1.APISchemaOpenAI, aigv1b1.APISchemaAnthropic:
		p := defaultPrefix
		return &p
	default:
		// AI Gateway uses the prefix only for OpenAI and Anthropic (ai-gateway
		// v1.0.0 api/v1beta1/shared_types.go, VersionedAPISchema.Prefix).
		return nil
	}
}
