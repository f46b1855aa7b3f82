package route

import (
	"slices"
	"strings"

	aigv1b1 "github.com/envoyproxy/ai-gateway/api/v1beta1"
	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1a2 "sigs.k8s.io/gateway-api/apis/v1alpha2"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/input/v1beta1"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
	"github.com/modelplaneai/function-inference-gateway/internal/upstream"
)

// Composition resource names of what a ModelRoute composes. Per-backend
// names end in the backend's name.
const (
	ResourceNamespace = "namespace"
	ResourceRoute     = "route"
	ResourceHTTPRoute = "httproute"
	// ResourceGatewayStatus observes the gateway's gateway-status
	// ConfigMap, whose changes wake the ModelRoute.
	ResourceGatewayStatus = "gateway-status"
	// ResourceSources is the watched ConfigMap of the versions of the
	// control-plane Secrets and ConfigMaps the route copies (sources),
	// whose changes wake the ModelRoute.
	ResourceSources = "sources"
	// ResourceAccess is the SecurityPolicy that restricts the model to
	// spec.access.callers (access.go).
	ResourceAccess = "access"

	prefixBackend    = "backend-"
	prefixAIBackend  = "aibackend-"
	prefixCredential = "credential-"
	prefixCredPolicy = "credpolicy-"
)

// implied lists every composition resource name the spec implies, and
// keeps the objects of a backend removed from the spec for as long as the
// observed route still names it (inRoute): deleting a Backend or
// AIServiceBackend that the serving route still points at makes AI Gateway
// reject the route and Envoy Gateway answer 500 until the new route is
// applied. They go once the route no longer names them, and only while
// the HTTPRoute AI Gateway generated is observed live, and Envoy Gateway
// has judged its current generation (upstream.RouteJudged): while its
// Object's last look failed (the HTTPRoute was being regenerated, and
// without provider watches the Object looks again only at its poll), or
// while Envoy Gateway has not yet translated the HTTPRoute that no longer
// names them (its own cache of the HTTPRoute can lag the provider's),
// what Envoy Gateway translates may still name them, and a Backend
// deleted then is an invalid destination. The model found the first
// window (test/sim, invariant 8). An Object not observed at all has not been
// created yet: the route's first reconcile composes it.
func implied(s *v1alpha1.ModelRouteSpec, in *v1beta1.Input, inRoute map[string]bool, route string, observed map[string]remote.Observed) map[string]bool {
	hr, ok := observed[ResourceHTTPRoute]
	known := !ok || hr.Live() && upstream.RouteJudged(hr.LiveAt("status"), in.GatewayNamespace, in.GatewayName, hr.LiveGeneration())
	out := map[string]bool{ResourceNamespace: true, ResourceRoute: true, ResourceHTTPRoute: true, ResourceGatewayStatus: true}
	if s.Access != nil {
		out[ResourceAccess] = true
	}
	for _, b := range s.Backends {
		k := place(route, b.Name).key
		out[prefixBackend+k] = true
		out[prefixAIBackend+k] = true
		// A key or a CA is a source the route follows (sources).
		if b.Authenticated() {
			out[prefixCredPolicy+k] = true
		}
		if _, ok := b.CredentialSecret(); ok {
			out[prefixCredential+k] = true
			out[ResourceSources] = true
		}
		if b.CARef() != nil {
			out[prefixCA+k] = true
			out[ResourceSources] = true
		}
	}
	// A backend's objects composed before, under keys the spec no longer
	// implies (a backend removed, or renamed: names.go), stay while the
	// route may still name them.
	for n := range observed {
		if obj, ok := keyObject(route, n); ok && (inRoute[obj] || !known) {
			out[n] = true
		}
	}
	return out
}

// builder builds a ModelRoute's manifests.
type builder struct {
	in             *v1beta1.Input
	spec           *v1alpha1.ModelRouteSpec
	name           string // the ModelRoute's name
	namespace      string // the ModelRoute's namespace on the control plane
	teamNamespace  string // its namespace on the gateway cluster
	providerConfig string
	sectionName    string
	observed       map[string]remote.Observed
	// places are the backends' placements, by backend name.
	places map[string]placement
}

func (b builder) meta(name string) remote.Meta {
	return remote.Meta{Name: name, Namespace: b.teamNamespace}
}

func (b builder) wrap(manifest any, opts ...remote.Option) *remote.Object {
	return remote.Wrap(b.providerConfig, manifest, opts...)
}

// child names a backend's objects on the gateway cluster.
func (b builder) child(backend string) string { return b.places[backend].object }

// key is the composition key of a backend's object that prefix starts.
func (b builder) key(prefix, backend string) string { return prefix + b.places[backend].key }

// namespaceObject creates the team namespace but never deletes it: other
// ModelRoutes of the same control-plane namespace share it.
func (b builder) namespaceObject() *remote.Object {
	return b.wrap(&remote.Manifest[struct{}]{
		APIVersion: "v1",
		Kind:       "Namespace",
		Metadata: remote.Meta{
			Name:   b.teamNamespace,
			Labels: map[string]string{names.TeamNamespaceLabel: b.namespace},
		},
	}, remote.NeverDelete())
}

// route is the model's AIGatewayRoute: one rule whose only match is the
// model header, so AI Gateway lists exactly this model in /v1/models. The
// Object is watched, so AI Gateway's verdict reaches RoutingReady within a
// watch event: an Object that is not Ready is otherwise re-read only every
// 30 s (provider-kubernetes v1.3.1 and v1.4.1 object.go, the poll-interval hook).
func (b builder) route(model string, refs []ref) *remote.Object {
	brs := make([]aigv1b1.AIGatewayRouteRuleBackendRef, len(refs))
	for i, r := range refs {
		name := b.child(r.backend.Name)
		if r.legacy != "" {
			name = r.legacy
		}
		brs[i] = aigv1b1.AIGatewayRouteRuleBackendRef{
			Name:              name,
			ModelNameOverride: r.backend.ModelNameOverride,
			Weight:            new(r.weight),
			Priority:          new(r.tier),
		}
	}
	return b.wrap(&remote.Manifest[aigv1b1.AIGatewayRouteSpec]{
		APIVersion: upstream.AIGatewayAPIVersion,
		Kind:       "AIGatewayRoute",
		Metadata:   b.meta(b.name),
		Spec: &aigv1b1.AIGatewayRouteSpec{
			ParentRefs: []gwapiv1.ParentReference{gateway.ParentRef(b.in, b.sectionName)},
			Rules: []aigv1b1.AIGatewayRouteRule{{
				Matches: []aigv1b1.AIGatewayRouteRuleMatch{{Headers: []gwapiv1.HTTPHeaderMatch{{
					Type: ptr.To(gwapiv1.HeaderMatchExact), Name: names.ModelHeader, Value: model,
				}}}},
				BackendRefs:   brs,
				Timeouts:      &gwapiv1.HTTPRouteTimeouts{Request: new(gwapiv1.Duration(b.spec.RequestTimeout()))},
				ModelsOwnedBy: new(b.namespace),
			}},
			// Token usage, for the access log and the token budgets.
			LLMRequestCosts: []aigv1b1.LLMRequestCost{
				{MetadataKey: names.InputTokensKey, Type: aigv1b1.LLMRequestCostTypeInputToken},
				{MetadataKey: names.OutputTokensKey, Type: aigv1b1.LLMRequestCostTypeOutputToken},
				{MetadataKey: names.TotalTokensKey, Type: aigv1b1.LLMRequestCostTypeTotalToken},
			},
		},
	}, remote.ReadyWhen(upstream.CELAccepted), remote.Watch())
}

// backend is the Envoy Gateway Backend: an FQDN endpoint, so Envoy Gateway
// builds one cluster whose localities carry the route's priorities, and TLS
// with SNI and the system CAs, or the backend's own CA, when the backend
// wants TLS.
func (b builder) backend(be v1alpha1.Backend) *remote.Object {
	spec := &egv1a1.BackendSpec{
		Endpoints: []egv1a1.BackendEndpoint{{FQDN: &egv1a1.FQDNEndpoint{Hostname: be.Endpoint.Hostname, Port: be.Port()}}},
	}
	if be.TLS() {
		spec.TLS = b.backendTLS(be)
	}
	return b.wrap(&remote.Manifest[egv1a1.BackendSpec]{
		APIVersion: upstream.EnvoyGatewayAPIVersion,
		Kind:       "Backend",
		Metadata:   b.meta(b.child(be.Name)),
		Spec:       spec,
	})
}

// aiBackend tells AI Gateway which API the backend speaks, and keeps the
// caller's identity from a backend that must not see it: AI Gateway's
// upstream ext-proc applies the AIServiceBackend's headerMutation to the
// request it sends that backend alone (ai-gateway v1.0.0
// internal/controller/gateway.go, mergeHeaderMutations into the filter
// config; internal/extproc/processor_impl.go, the upstream processor's
// header mutator). Envoy sets x-modelplane-caller after authenticating
// the caller, so the header reaches every backend unless removed here.
func (b builder) aiBackend(be v1alpha1.Backend) *remote.Object {
	spec := &aigv1b1.AIServiceBackendSpec{
		APISchema: aigv1b1.VersionedAPISchema{
			Name: aigv1b1.APISchema(be.Schema.Name), Prefix: be.Prefix(), Version: be.Schema.Version,
		},
		BackendRef: gwapiv1.BackendObjectReference{
			Group: ptr.To(gwapiv1.Group(upstream.EnvoyGatewayGroup)), Kind: ptr.To(gwapiv1.Kind("Backend")), Name: gwapiv1.ObjectName(b.child(be.Name)),
		},
	}
	if !be.ForwardsCaller(b.in.ClusterDomain) {
		spec.HeaderMutation = &aigv1b1.HTTPHeaderMutation{Remove: []string{names.CallerHeader}}
	}
	return b.wrap(&remote.Manifest[aigv1b1.AIServiceBackendSpec]{
		APIVersion: upstream.AIGatewayAPIVersion,
		Kind:       "AIServiceBackend",
		Metadata:   b.meta(b.child(be.Name)),
		Spec:       spec,
	})
}

// httpRoute observes, and only observes, the HTTPRoute AI Gateway
// generates for the model's AIGatewayRoute under the same name and
// namespace (ai-gateway v1.0.0 internal/controller/ai_gateway_route.go,
// newHTTPRoute). Envoy serves what Envoy Gateway accepts on that HTTPRoute,
// not what AI Gateway accepts on the AIGatewayRoute. The watch brings
// Envoy Gateway's verdict to the ModelRoute at once.
func (b builder) httpRoute() *remote.Object {
	return b.wrap(&remote.Manifest[struct{}]{
		APIVersion: upstream.GatewayAPIVersion,
		Kind:       "HTTPRoute",
		Metadata:   b.meta(b.name),
	}, remote.ObserveOnly(), remote.Watch())
}

// gatewayStatus observes, and only observes, the ConfigMap in which the
// InferenceGateway publishes GatewayReady on the gateway cluster
// (gateway.builder.gatewayStatus). The watch makes provider-kubernetes
// update this Object as soon as the ConfigMap changes, and Crossplane
// reconciles the ModelRoute when one of its composed resources changes
// (realtime compositions), so RoutingReady follows GatewayReady within a
// watch event instead of at the ModelRoute's next TTL: Crossplane does not
// watch required resources.
func (b builder) gatewayStatus() *remote.Object {
	return b.wrap(&remote.Manifest[struct{}]{
		APIVersion: "v1",
		Kind:       "ConfigMap",
		Metadata:   remote.Meta{Name: names.GatewayStatus(b.in.GatewayName), Namespace: b.in.GatewayNamespace},
	}, remote.ObserveOnly(), remote.Watch())
}

// sources lists the control-plane objects whose values a route in
// namespace ns copies to the gateway cluster, which Crossplane does not
// watch: each backend's API-key Secret and its CA's Secret or ConfigMap,
// each once, in the order of the spec.
func sources(s *v1alpha1.ModelRouteSpec, ns string) []remote.Source {
	var out []remote.Source
	add := func(src remote.Source) {
		if !slices.Contains(out, src) {
			out = append(out, src)
		}
	}
	for _, be := range s.Backends {
		if cs, ok := be.CredentialSecret(); ok {
			add(remote.Source{Kind: "Secret", Name: cs.Ref.Name, Namespace: ns})
		}
		if r := be.CARef(); r != nil {
			add(remote.Source{Kind: r.KindOrDefault(), Name: r.Name, Namespace: ns})
		}
	}
	return out
}

// sourceVersions is the watched ConfigMap that follows the versions of
// the route's sources (remote.VersionsMap says how): a rotated API key or
// CA, or one created after the route, changes it, and its change wakes
// the ModelRoute, which then applies the copies at the new version. The
// ready route's TTL is then a safety net only (ReadyRequeue).
func (b builder) sourceVersions(src []remote.Source) *remote.Object {
	may := remote.CopyStateIn(b.observed, ResourceSources).MayReference
	return remote.VersionsMap{Meta: b.meta(names.Child(b.name, sourcesSuffix)), Sources: src}.Object(b.providerConfig, may)
}

// sourcesSuffix ends the name of the route's sourceVersions ConfigMap on
// the gateway cluster. No copy of a backend's is a ConfigMap of that name
// (names.BackendCA says why).
const sourcesSuffix = "sources"

// credential is the backend's API-key Secret on the gateway cluster, under
// the key AI Gateway reads. provider-kubernetes copies the key from the
// ModelRoute's Secret on the control plane, in two steps (remote.SecretCopy
// says why): withKey adds the reference once the Object exists and is
// finalized. The control-plane Secret's resourceVersion in an annotation
// makes a rotated key reach the gateway cluster at the ModelRoute's next
// reconcile. Watching the Object would do it too, but would make the
// provider watch every Secret of the gateway cluster.
func (b builder) credential(be v1alpha1.Backend, withKey bool, version string) *remote.Object {
	cs, _ := be.CredentialSecret()
	ref := cs.Ref
	return remote.SecretCopy{
		Meta: b.meta(b.child(be.Name)),
		Type: "Opaque",
		Name: ref.Name, Namespace: b.namespace,
		// Brackets, because a Secret key may hold dots, and AI Gateway's
		// service_account.json does (crossplane-runtime v2.4.0
		// pkg/fieldpath/fieldpath.go reads data[.config.yml] as one
		// field); the others keep the dotted form every existing route's
		// Object has.
		Keys:    []remote.KeyCopy{{FieldPath: "data[" + ref.Key + "]", ToFieldPath: toField(cs.Key)}},
		Version: version, VersionAnnotation: names.KeyVersionAnnotation,
	}.Object(b.providerConfig, withKey)
}

// credPolicy attaches the backend's credential to its AIServiceBackend:
// an API key in the header the backend's provider expects
// (v1alpha1.CredentialTypes), every type reading the copy's apiKey entry,
// or cloud credentials (cloudPolicy).
func (b builder) credPolicy(be v1alpha1.Backend) *remote.Object {
	ref := &gwapiv1.SecretObjectReference{Name: gwapiv1.ObjectName(b.child(be.Name))}
	spec := &aigv1b1.BackendSecurityPolicySpec{
		TargetRefs: []gwapiv1a2.LocalPolicyTargetReference{{
			Group: upstream.AIGatewayGroup, Kind: "AIServiceBackend", Name: gwapiv1.ObjectName(b.child(be.Name)),
		}},
		Type: v1alpha1.CredentialTypes[aigv1b1.APISchema(be.Schema.Name)],
	}
	if be.Credentials != nil {
		cloudPolicy(spec, be.Credentials, ref)
		return b.wrap(&remote.Manifest[aigv1b1.BackendSecurityPolicySpec]{
			APIVersion: upstream.AIGatewayAPIVersion, Kind: "BackendSecurityPolicy", Metadata: b.meta(b.child(be.Name)), Spec: spec,
		})
	}
	switch spec.Type {
	case aigv1b1.BackendSecurityPolicyTypeAnthropicAPIKey:
		spec.AnthropicAPIKey = &aigv1b1.BackendSecurityPolicyAnthropicAPIKey{SecretRef: ref}
	case aigv1b1.BackendSecurityPolicyTypeAzureAPIKey:
		spec.AzureAPIKey = &aigv1b1.BackendSecurityPolicyAzureAPIKey{SecretRef: ref}
	default:
		spec.APIKey = &aigv1b1.BackendSecurityPolicyAPIKey{SecretRef: ref}
	}
	return b.wrap(&remote.Manifest[aigv1b1.BackendSecurityPolicySpec]{
		APIVersion: upstream.AIGatewayAPIVersion,
		Kind:       "BackendSecurityPolicy",
		Metadata:   b.meta(b.child(be.Name)),
		Spec:       spec,
	})
}

// cloudPolicy makes spec a BackendSecurityPolicy of the cloud's type, its
// Secret, when it has one, the backend's copy ref (ai-gateway v1.0.0
// api/v1beta1/backendsecurity_policy.go). AWS without a Secret signs with
// the default credential chain of Envoy's pods, and GCP without one with
// their Application Default Credentials: AI Gateway's controller then
// writes only the project and region into the filter config
// (internal/controller/gateway.go, bspToFilterAPIBackendAuth) and its
// ext_proc finds the credentials itself (internal/backendauth/gcp.go,
// newGCPHandler).
func cloudPolicy(spec *aigv1b1.BackendSecurityPolicySpec, c *v1alpha1.Credentials, ref *gwapiv1.SecretObjectReference) {
	switch {
	case c.AWS != nil:
		spec.Type = aigv1b1.BackendSecurityPolicyTypeAWSCredentials
		spec.AWSCredentials = &aigv1b1.BackendSecurityPolicyAWSCredentials{Region: c.AWS.Region}
		if c.AWS.SecretRef != nil {
			profile := c.AWS.Profile
			if profile == "" {
				profile = v1alpha1.DefaultAWSProfile
			}
			spec.AWSCredentials.CredentialsFile = &aigv1b1.AWSCredentialsFile{SecretRef: ref, Profile: profile}
		}
	case c.GCP != nil:
		spec.Type = aigv1b1.BackendSecurityPolicyTypeGCPCredentials
		spec.GCPCredentials = &aigv1b1.BackendSecurityPolicyGCPCredentials{ProjectName: c.GCP.ProjectName, Region: c.GCP.Region}
		if c.GCP.SecretRef != nil {
			spec.GCPCredentials.CredentialsFile = &aigv1b1.GCPCredentialsFile{SecretRef: ref}
		}
	case c.Azure != nil:
		spec.Type = aigv1b1.BackendSecurityPolicyTypeAzureCredentials
		spec.AzureCredentials = &aigv1b1.BackendSecurityPolicyAzureCredentials{ClientID: c.Azure.ClientID, TenantID: c.Azure.TenantID, ClientSecretRef: ref}
	}
}

// toField is the fieldpath of key under a Secret's data.
func toField(key string) string {
	if strings.Contains(key, ".") {
		return "data[" + key + "]"
	}
	return "data." + key
}
