package v1alpha1

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"

	aigv1b1 "github.com/envoyproxy/ai-gateway/api/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/crossplane/function-sdk-go/errors"
)

// Validate checks a ModelRoute's spec: what the schema says, for crossplane
// render, which does not validate an XR against its XRD, and what the
// schema cannot say. Every problem is an error that names the field.
func (s *ModelRouteSpec) Validate() error {
	bad := func(format string, a ...any) error {
		return errors.Errorf("cannot compose ModelRoute: "+format, a...)
	}
	if err := s.validateGateway(); err != nil {
		return bad("%s", err.Error())
	}
	if len(s.Model) > 4096 {
		return bad("spec.model is %d characters; AI Gateway matches at most 4096", len(s.Model))
	}
	if err := validateModelName(s.Model); err != nil {
		return bad("%s", err.Error())
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
	if s.Timeouts != nil && s.Timeouts.Request != "" && !gatewayDuration.MatchString(s.Timeouts.Request) {
		return bad("spec.timeouts.request %q is not a Gateway API duration; use a form such as 600s, 10m or 1h30m", s.Timeouts.Request)
	}
	if err := s.Access.validate(); err != nil {
		return bad("%s", err.Error())
	}
	return nil
}

// validate checks spec.access; nil is every authenticated caller.
func (a *Access) validate() error {
	if a == nil {
		return nil
	}
	switch n := len(a.Callers); {
	case n == 0:
		return errors.New("spec.access.callers is empty; list the client IDs that may call the model, or remove spec.access to let every authenticated caller call it")
	case n > MaxAccessCallers:
		return errors.Errorf("spec.access.callers has %d client IDs; list at most %d, the most values Envoy Gateway matches in one authorization rule", n, MaxAccessCallers)
	}
	seen := make(map[string]int, len(a.Callers))
	for i, id := range a.Callers {
		if errs := clientIDErrors(id); len(errs) > 0 {
			return errors.Errorf("spec.access.callers[%d] %q is not a client ID (%s); name a data key of one of the InferenceGateway's callers' Secrets", i, id, strings.Join(errs, "; "))
		}
		// The list is a set (+listType=set): the API server refuses a
		// client ID twice.
		if j, dup := seen[id]; dup {
			return errors.Errorf("spec.access.callers[%d] %q is also spec.access.callers[%d]; list each client ID once", i, id, j)
		}
		seen[id] = i
	}
	return nil
}

// validateGateway checks that exactly one of spec.gatewayName and
// spec.gatewaySelector is set, and that it is well formed.
func (s *ModelRouteSpec) validateGateway() error {
	switch {
	case s.GatewayName == "" && s.GatewaySelector == nil:
		return errors.New("neither spec.gatewayName nor spec.gatewaySelector is set; set exactly one: gatewayName names the InferenceGateway that serves this model, gatewaySelector selects every InferenceGateway whose labels match")
	case s.GatewayName != "" && s.GatewaySelector != nil:
		return errors.Errorf("both spec.gatewayName %q and spec.gatewaySelector are set; set exactly one: gatewayName names the InferenceGateway that serves this model, gatewaySelector selects every InferenceGateway whose labels match", s.GatewayName)
	case s.GatewaySelector != nil:
		_, err := s.GatewaySelector.Selector()
		return err
	}
	if errs := validation.IsDNS1123Subdomain(s.GatewayName); len(errs) > 0 {
		return errors.Errorf("spec.gatewayName %q is not an InferenceGateway name (%s); name the InferenceGateway that serves this model", s.GatewayName, strings.Join(errs, "; "))
	}
	return nil
}

func (b Backend) validate(f string) error {
	for _, check := range []func(string) error{b.validateEndpoint, b.validateSchema, b.validateTier, b.validateAPIKey, b.validateCredentials, b.validateCredentialRef} {
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
	// IP makes an EDS cluster instead (envoyproxy/gateway v1.8.3
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
		if !b.TLS() {
			return errors.Errorf("%s.endpoint.tlsConfig is set with tls: false; remove tls: false to connect with TLS, or remove tlsConfig", f)
		}
		if r := c.CARef; r != nil {
			if r.Kind != "" && r.Kind != CAKindConfigMap && r.Kind != CAKindSecret {
				return errors.Errorf("%s.endpoint.tlsConfig.caRef.kind is %q; set ConfigMap or Secret", f, r.Kind)
			}
			if errs := validation.IsDNS1123Subdomain(r.Name); len(errs) > 0 {
				return errors.Errorf("%s.endpoint.tlsConfig.caRef.name %q is not a %s name", f, r.Name, r.KindOrDefault())
			}
		}
	}
	return nil
}

func (b Backend) validateSchema(f string) error {
	known := false
	for _, s := range Schemas {
		known = known || string(s) == b.Schema.Name
	}
	if !known {
		return errors.Errorf("%s.schema.name %q is not a schema AI Gateway knows; use one of %v", f, b.Schema.Name, Schemas)
	}
	if p := b.Schema.Prefix; p != nil && (!apiPrefix.MatchString(*p) || strings.HasPrefix(*p, "//")) {
		return errors.Errorf("%s.schema.prefix %q is not an API path prefix; use a path such as /v1 or /api/v1, without a scheme, host, credentials, query, spaces or control characters", f, *p)
	}
	return nil
}

// apiPrefix is a path prefix AI Gateway joins to the request's path
// (ai-gateway v1.0.0 internal/translator, path.Join("/", prefix, ...)):
// RFC 3986 path characters without ':' and '@', so that neither a URL
// (scheme, host, user:password@) nor a query, a fragment, whitespace or a
// control character, which would end up in the :path Envoy sends the
// backend, gets in. With or without a leading "/", as AI Gateway takes both.
var apiPrefix = regexp.MustCompile(`^[A-Za-z0-9._~!$&'()*+,;=%/-]*$`)

func (b Backend) validateTier(f string) error {
	if p := b.Priority; p != nil && (*p < 0 || *p > MaxPriority) {
		return errors.Errorf("%s.priority is %d; use 0 (preferred) to %d", f, *p, MaxPriority)
	}
	if w := b.Weight; w != nil && (*w < 1 || *w > MaxWeight) {
		return errors.Errorf("%s.weight is %d; use 1 to %d", f, *w, MaxWeight)
	}
	return nil
}

func (b Backend) validateAPIKey(f string) error {
	if b.APIKey == nil {
		return nil
	}
	if _, ok := CredentialTypes[aigv1b1.APISchema(b.Schema.Name)]; !ok {
		return errors.Errorf("%s.apiKey is set, but the %s schema takes no API key: AI Gateway signs AWS requests with AWS credentials and Google requests with GCP credentials (ai-gateway v1.0.0 internal/backendauth); set credentials instead; remove apiKey", f, b.Schema.Name)
	}
	return nil
}

// validateCredentialRef checks the Secret reference of a backend's API
// key or cloud credentials.
func (b Backend) validateCredentialRef(f string) error {
	cs, ok := b.CredentialSecret()
	if !ok {
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(cs.Ref.Name); len(errs) > 0 {
		return errors.Errorf("%s.%s.name %q is not a Secret name", f, cs.Field, cs.Ref.Name)
	}
	if errs := validation.IsConfigMapKey(cs.Ref.Key); len(errs) > 0 {
		return errors.Errorf("%s.%s.key %q is not a Secret key (%s)", f, cs.Field, cs.Ref.Key, strings.Join(errs, "; "))
	}
	return nil
}

// cloudSchemas are the schemas each cloud's credentials serve.
var cloudSchemas = map[string][]string{
	"aws":   {string(aigv1b1.APISchemaAWSBedrock), string(aigv1b1.APISchemaAWSAnthropic)},
	"gcp":   {string(aigv1b1.APISchemaGCPVertexAI), string(aigv1b1.APISchemaGCPAnthropic)},
	"azure": {string(aigv1b1.APISchemaAzureOpenAI)},
}

// validateCredentials checks a backend's cloud credentials: one cloud,
// the cloud of the backend's schema, its fields, and not with an API key.
func (b Backend) validateCredentials(f string) error {
	c := b.Credentials
	if c == nil {
		return nil
	}
	if b.APIKey != nil {
		return errors.Errorf("%s has both apiKey and credentials; set one: apiKey for a key, credentials for cloud credentials", f)
	}
	var clouds []string
	for _, x := range []struct {
		set   bool
		cloud string
	}{{c.AWS != nil, "aws"}, {c.GCP != nil, "gcp"}, {c.Azure != nil, "azure"}} {
		if x.set {
			clouds = append(clouds, x.cloud)
		}
	}
	if len(clouds) != 1 {
		return errors.Errorf("%s.credentials sets %d clouds (%s); set exactly one of aws, gcp and azure", f, len(clouds), strings.Join(clouds, ", "))
	}
	if want := cloudSchemas[clouds[0]]; !slices.Contains(want, b.Schema.Name) {
		return errors.Errorf("%s.credentials.%s does not fit the %s schema: %s credentials are for the %s schemas; fix spec.backends.schema.name or the credentials", f, clouds[0], b.Schema.Name, clouds[0], strings.Join(want, " and "))
	}
	return c.check(f)
}

// check checks the fields of the one cloud c sets.
func (c *Credentials) check(f string) error {
	switch {
	case c.AWS != nil:
		if c.AWS.Region == "" {
			return errors.Errorf("%s.credentials.aws.region is required: the AWS region requests are signed for, such as eu-west-1", f)
		}
		if c.AWS.Profile != "" && c.AWS.SecretRef == nil {
			return errors.Errorf("%s.credentials.aws.profile needs credentials.aws.secretRef: it names a profile of that credentials file", f)
		}
	case c.GCP != nil:
		if c.GCP.ProjectName == "" || c.GCP.Region == "" {
			return errors.Errorf("%s.credentials.gcp needs projectName and region", f)
		}
	case c.Azure.ClientID == "" || c.Azure.TenantID == "" || c.Azure.ClientSecretRef == nil:
		return errors.Errorf("%s.credentials.azure needs clientID, tenantID and clientSecretRef (the service principal's client secret)", f)
	}
	return nil
}
