package gateway

import (
	"strconv"
	"time"

	aigv1b1 "github.com/envoyproxy/ai-gateway/api/v1beta1"
	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/input/v1beta1"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
	"github.com/modelplaneai/function-inference-gateway/internal/rollout"
	"github.com/modelplaneai/function-inference-gateway/internal/upstream"
)

// Composition resource names of what an InferenceGateway composes.
const (
	resourceNamespace       = "gateway-namespace"
	resourceEnvoyProxy      = "envoy-proxy"
	resourceGateway         = "gateway"
	resourceAnchorRoute     = "anchor-route"
	resourceFailoverPolicy  = "failover-policy"
	resourceClientPolicy    = "client-policy"
	ResourceEnvoyDeployment = "envoy-deployment"
	ResourceGatewayStatus   = "gateway-status"

	// The front door: the gateway's own routes on the plain HTTP
	// listener, in their own namespace, open to every caller.
	ResourceFrontDoorNamespace = "front-door-namespace"
	ResourceHealthFilter       = "healthz-filter"
	ResourceHealthRoute        = "healthz-route"
	ResourceFrontDoorPolicy    = "front-door-policy"
	// ResourceRedirectRoute is composed only with TLS.
	ResourceRedirectRoute = "https-redirect-route"

	// resourceFilterConfigSecret observes AI Gateway's filter-config
	// Secret; composed only when the Input says the provider sanitizes
	// Secrets (package gatewayready, marker.go).
	resourceFilterConfigSecret = "filter-config-secret"

	// ResourceTLSSecretPrefix, followed by the Secret's name, is a TLS
	// Secret copied from the control plane; composed only with TLS.
	ResourceTLSSecretPrefix = "tls-secret-"
)

// Resources lists every composition resource name an InferenceGateway
// implies whatever its spec; implied adds those of TLS.
var Resources = []string{
	resourceNamespace, resourceEnvoyProxy, resourceGateway, resourceAnchorRoute, resourceFailoverPolicy, resourceClientPolicy, ResourceEnvoyDeployment,
	ResourceGatewayStatus, ResourceFrontDoorNamespace, ResourceHealthFilter, ResourceHealthRoute, ResourceFrontDoorPolicy,
}

// The listeners' ports (ListenerHTTP, ListenerHTTPS).
const (
	portHTTP  = 80
	portHTTPS = 443
)

// builder builds the gateway's manifests for one spec and Input.
type builder struct {
	in   *v1beta1.Input
	spec *v1alpha1.InferenceGatewaySpec
}

func (b builder) meta(name string) remote.Meta {
	return remote.Meta{Name: name, Namespace: b.in.GatewayNamespace}
}

func (b builder) wrap(manifest any, opts ...remote.Option) *remote.Object {
	return remote.Wrap(b.spec.ProviderConfigName, manifest, append([]remote.Option{remote.InNamespace(b.in.ObjectNamespace)}, opts...)...)
}

// namespace creates the gateway namespace, which nothing else creates on a
// fresh gateway cluster, and never deletes it: whatever else lives there
// is not the function's to remove.
func (b builder) namespace() *remote.Object {
	return b.wrap(&remote.Manifest[struct{}]{
		APIVersion: "v1",
		Kind:       "Namespace",
		Metadata:   remote.Meta{Name: b.in.GatewayNamespace},
	}, remote.NeverDelete())
}

// envoyProxy pins the Envoy Deployment's name, so the observe-only Object
// can find it (Envoy Gateway uses a set envoyDeployment.name verbatim).
// mergeType StrategicMerge lays it over the GatewayClass's EnvoyProxy and
// Envoy Gateway's defaults instead of replacing them, so the platform's
// settings on the class (service type, traffic policy, resources, ...)
// survive and only what is set here wins (gateway v1.8.3
// internal/gatewayapi/envoyproxy_merge.go, MergeEnvoyProxyConfigs: without
// mergeType the Gateway's EnvoyProxy replaces the class's wholesale).
//
// It also sets what long-lived streaming traffic needs (envoy.go): a drain
// timeout a completion can finish in, pods spread across nodes and zones,
// and a JSON access log; and, once the function has written it, its own
// ext-proc marker as a pod annotation, with the value it was first written
// with (package gatewayready, marker.go; empty: none).
func (b builder) envoyProxy(marker string, backendTLS *egv1a1.BackendTLSConfig) *remote.Object {
	pod := &egv1a1.KubernetesPodSpec{TopologySpreadConstraints: b.spread()}
	if marker != "" {
		pod.Annotations = map[string]string{rollout.VerifiedMarker: marker}
	}
	return b.wrap(&remote.Manifest[egv1a1.EnvoyProxySpec]{
		APIVersion: upstream.EnvoyGatewayAPIVersion,
		Kind:       "EnvoyProxy",
		Metadata:   b.meta(b.in.GatewayName),
		Spec: &egv1a1.EnvoyProxySpec{
			MergeType: ptr.To(egv1a1.StrategicMerge),
			Provider: &egv1a1.EnvoyProxyProvider{
				Type: egv1a1.EnvoyProxyProviderTypeKubernetes,
				Kubernetes: &egv1a1.EnvoyProxyKubernetesProvider{
					EnvoyDeployment: &egv1a1.KubernetesDeploymentSpec{
						Name:     new(names.EnvoyDeployment(b.in.GatewayNamespace, b.in.GatewayName)),
						Replicas: new(b.spec.ReplicaCount()),
						Pod:      pod,
						Patch:    dnsPatch,
					},
					// One pod may be drained at a time; the rollout rule
					// keeps GatewayReady True while the other serves.
					EnvoyPDB: &egv1a1.KubernetesPodDisruptionBudgetSpec{
						MaxUnavailable: new(intstr.FromInt32(1)),
					},
					EnvoyServiceAccount: b.serviceAccount(),
				},
			},
			Shutdown:   &egv1a1.ShutdownConfig{DrainTimeout: new(gwapiv1.Duration(b.spec.DrainTimeout()))},
			Telemetry:  b.telemetry(),
			BackendTLS: backendTLS,
		},
	})
}

// dnsPatch gives the Envoy pods ndots 1. With the pod default of 5, every
// backend hostname with fewer than five dots (openrouter.ai,
// api.openai.com) is first looked up under each search domain of the pod,
// and Envoy answers 503 until its DNS cluster first resolves. With ndots 1
// a name with a dot is tried as it is first; a bare Service name still goes
// through the search list. Envoy Gateway has no dnsConfig field, but strategic-merge
// patches the Deployment it renders with envoyDeployment.patch (gateway
// v1.8.3 api/v1alpha1/shared_types.go, KubernetesPatchSpec;
// internal/infrastructure/kubernetes/proxy/resource_provider.go,
// ApplyMergePatch). It is part of the pod template, so adding it rolls the
// Envoy pods once.
var dnsPatch = &egv1a1.KubernetesPatchSpec{
	Type:  ptr.To(egv1a1.StrategicMerge),
	Value: apiextensionsv1.JSON{Raw: []byte(`{"spec":{"template":{"spec":{"dnsConfig":{"options":[{"name":"ndots","value":"1"}]}}}}}`)},
}

// gateway has a plain HTTP listener on 80 and, with TLS, an https listener
// on 443 that terminates TLS. Which namespaces each admits is
// listenerAdmission's; none admits the gateway namespace, so the anchor
// route is never served.
func (b builder) gateway() *remote.Object {
	httpAdmits, httpsAdmits := b.listenerAdmission()
	listeners := []gwapiv1.Listener{{
		Name: ListenerHTTP, Port: portHTTP, Protocol: gwapiv1.HTTPProtocolType, AllowedRoutes: httpAdmits,
	}}
	if b.spec.TLSEnabled() {
		refs := make([]gwapiv1.SecretObjectReference, len(b.spec.TLS.CertificateRefs))
		for i, r := range b.spec.TLS.CertificateRefs {
			refs[i] = gwapiv1.SecretObjectReference{Name: gwapiv1.ObjectName(r.Name)}
		}
		listeners = append(listeners, gwapiv1.Listener{
			Name:          ListenerHTTPS,
			Hostname:      new(gwapiv1.Hostname(b.spec.Hostname)),
			Port:          portHTTPS,
			Protocol:      gwapiv1.HTTPSProtocolType,
			TLS:           &gwapiv1.ListenerTLSConfig{Mode: ptr.To(gwapiv1.TLSModeTerminate), CertificateRefs: refs},
			AllowedRoutes: httpsAdmits,
		})
	}
	class := b.spec.ClassName
	if class == "" {
		class = b.in.GatewayClassName
	}
	return b.wrap(&remote.Manifest[gwapiv1.GatewaySpec]{
		APIVersion: upstream.GatewayAPIVersion,
		Kind:       "Gateway",
		Metadata:   b.meta(b.in.GatewayName),
		Spec: &gwapiv1.GatewaySpec{
			GatewayClassName: gwapiv1.ObjectName(class),
			Infrastructure: &gwapiv1.GatewayInfrastructure{
				Annotations: b.infrastructureAnnotations(),
				ParametersRef: &gwapiv1.LocalParametersReference{
					Group: upstream.EnvoyGatewayGroup, Kind: "EnvoyProxy", Name: b.in.GatewayName,
				},
			},
			Listeners: listeners,
		},
	}, remote.ReadyWhen(upstream.CELHasAddress), remote.Watch())
}

// anchorRule is the anchor route's only rule: an Exact match on a header
// that is not x-ai-eg-model, and no backendRefs. AI Gateway counts any
// attached AIGatewayRoute as an effective route and keeps the ext-proc
// sidecar injected (ai-gateway v1.0.0 internal/controller/gateway.go,
// reconcileFilterConfigSecret), while /v1/models lists only Exact
// x-ai-eg-model matches, so the anchor is never listed. The AIGatewayRoute
// CRD allows a rule without backendRefs (no MinItems).
func anchorRule(in *v1beta1.Input) aigv1b1.AIGatewayRouteRule {
	return aigv1b1.AIGatewayRouteRule{
		Matches: []aigv1b1.AIGatewayRouteRuleMatch{{Headers: []gwapiv1.HTTPHeaderMatch{{
			Type:  ptr.To(gwapiv1.HeaderMatchExact),
			Name:  gwapiv1.HTTPHeaderName(in.AnchorHeader.Name),
			Value: in.AnchorHeader.Value,
		}}}},
	}
}

func (b builder) anchorRoute() *remote.Object {
	return b.wrap(&remote.Manifest[aigv1b1.AIGatewayRouteSpec]{
		APIVersion: upstream.AIGatewayAPIVersion,
		Kind:       "AIGatewayRoute",
		Metadata:   b.meta(names.AnchorRoute(b.in.GatewayName)),
		Spec: &aigv1b1.AIGatewayRouteSpec{
			ParentRefs: []gwapiv1.ParentReference{ParentRef(b.in, "")},
			Rules:      []aigv1b1.AIGatewayRouteRule{anchorRule(b.in)},
		},
	}, remote.ReadyWhen(upstream.CELAccepted), remote.Watch())
}

// gatewayTarget is a policy's targetRefs: the Gateway, so the policy
// reaches every route attached to it, the HTTPRoutes AI Gateway generates
// in team namespaces included.
func (b builder) gatewayTarget() egv1a1.PolicyTargetReferences {
	return egv1a1.PolicyTargetReferences{
		TargetRefs: []gwapiv1.LocalPolicyTargetReferenceWithSectionName{{
			LocalPolicyTargetReference: gwapiv1.LocalPolicyTargetReference{
				Group: upstream.GatewayAPIGroup, Kind: "Gateway", Name: gwapiv1.ObjectName(b.in.GatewayName),
			},
		}},
	}
}

// failoverPolicy makes ModelRoute priority tiers really fail over. Envoy
// moves to a lower priority only when hosts are unhealthy or a retry
// priority plugin says so; numAttemptsPerPriority makes Envoy Gateway
// install previous_priorities (envoyproxy/gateway v1.8.3
// internal/xds/translator/route.go), so each retry tries the next tier.
// Only the listed triggers and status codes retry. Passive health checks
// eject failing backends; the panic threshold decides what happens when a
// tier is ejected and no healthy tier is left (docs/failover.md).
//
// It also carries the token budgets (budgets.go, rateLimit). They go into
// this policy rather than one of their own: Envoy Gateway refuses a second
// BackendTrafficPolicy that targets the same Gateway as Conflicted,
// "another BackendTrafficPolicy has already attached to it" (gateway
// v1.8.3 internal/gatewayapi/backendtrafficpolicy.go,
// resolveBackendTrafficPolicyGatewayTargetRef). Without budgets the policy
// has no rate limit, and Envoy Gateway needs no rate-limit backend. With
// them and global rate limiting off in Envoy Gateway's configuration, it
// refuses the whole policy, and every route it covers answers 500
// (translateBackendTrafficPolicyForGateway): GatewayReady then says
// TrafficPolicyNotAccepted (package gatewayready, observeTrafficPolicy).
func (b builder) failoverPolicy() *remote.Object {
	return policy(b, "BackendTrafficPolicy", names.FailoverPolicy(b.in.GatewayName), &egv1a1.BackendTrafficPolicySpec{
		PolicyTargetReferences: b.gatewayTarget(),
		ClusterSettings: egv1a1.ClusterSettings{
			Retry: &egv1a1.Retry{
				NumRetries:             new(b.spec.NumRetries()),
				NumAttemptsPerPriority: ptr.To[int32](1),
				RetryOn:                b.spec.RetryOn(),
			},
			HealthCheck: &egv1a1.HealthCheck{
				Passive: &egv1a1.PassiveHealthCheck{
					Interval:             ptr.To(gwapiv1.Duration("5s")),
					Consecutive5xxErrors: ptr.To[uint32](5),
					BaseEjectionTime:     ptr.To(gwapiv1.Duration("30s")),
					MaxEjectionPercent:   ptr.To[int32](100),
				},
				PanicThreshold: new(uint32(b.spec.PanicThreshold())), //nolint:gosec // Validate keeps it within 0 to 100
			},
		},
		RateLimit: b.rateLimit(),
	})
}

// clientPolicy lets whole LLM requests and responses through: AI Gateway's
// ext-proc buffers complete bodies, and the listener's buffer limit bounds
// them (DefaultBufferLimit). The HTTP/2 windows keep a large body from
// stalling on flow control.
//
// It also removes any names.CallerHeader a client sends, before Envoy
// routes or any filter reads it: on an open gateway nothing else would, and
// the access log and the backends would take the client's word for who it
// is. Envoy Gateway makes earlyRequestHeaders the HTTP connection manager's
// early header mutation (gateway v1.8.3 internal/xds/translator/listener.go,
// buildEarlyHeaderMutation), which runs before every HTTP filter; with
// caller authentication on, api_key_auth then sets the header to the
// authenticated client ID.
func (b builder) clientPolicy() *remote.Object {
	limit := b.spec.BufferLimit()
	return policy(b, "ClientTrafficPolicy", names.ClientPolicy(b.in.GatewayName), &egv1a1.ClientTrafficPolicySpec{
		PolicyTargetReferences: b.gatewayTarget(),
		Connection:             &egv1a1.ClientConnection{BufferLimit: &limit},
		HTTP2: &egv1a1.HTTP2Settings{
			InitialStreamWindowSize:     new(http2StreamWindow),
			InitialConnectionWindowSize: new(http2ConnectionWindow),
		},
		Headers: &egv1a1.HeaderSettings{
			EarlyRequestHeaders: &egv1a1.HTTPHeaderFilter{Remove: []string{names.CallerHeader}},
		},
	})
}

// policy is an Envoy Gateway policy in the gateway namespace, whose Object
// is Ready once Envoy Gateway has accepted it (upstream.CELPolicyAccepted).
//
// It is watched, like the Gateway and the anchor route, whose Ready also
// waits on a controller's verdict: provider-kubernetes re-reads an Object
// that is not Ready only every 30 s (v1.3.1 object.go, the poll-interval
// hook), and Envoy Gateway and AI Gateway give their verdicts after the
// provider's first read: without the watch, GatewayReady would lag a
// verdict by up to that poll.
func policy[S any](b builder, kind, name string, spec *S) *remote.Object {
	return b.wrap(&remote.Manifest[S]{
		APIVersion: upstream.EnvoyGatewayAPIVersion,
		Kind:       kind,
		Metadata:   b.meta(name),
		Spec:       spec,
	}, remote.ReadyWhen(upstream.CELPolicyAccepted), remote.Watch())
}

// envoyDeployment observes, and only observes, the Envoy Deployment under
// its pinned name in Envoy Gateway's namespace. The watch makes a rollout
// show up at once rather than at the next poll (10 minutes while Ready in
// provider-kubernetes' default --poll).
func (b builder) envoyDeployment(celQuery string) *remote.Object {
	return b.wrap(&remote.Manifest[struct{}]{
		APIVersion: "apps/v1",
		Kind:       "Deployment",
		Metadata: remote.Meta{
			Name:      names.EnvoyDeployment(b.in.GatewayNamespace, b.in.GatewayName),
			Namespace: b.in.EnvoyGatewayNamespace,
		},
	}, remote.ObserveOnly(), remote.Watch(), remote.ReadyWhen(celQuery))
}

// filterConfigSecret observes AI Gateway's filter-config Secret, the
// evidence the function needs before it writes its own ext-proc marker
// (package gatewayready, marker.go). Observe only: the Secret is AI
// Gateway's, and deleting the Object must never delete it
// (crossplane-runtime v2.4.0 pkg/reconciler/managed/policies.go,
// ShouldDelete). Not watched: a watch
// would need list and watch on every Secret of the gateway cluster
// (provider-kubernetes v1.3.1 and v1.4.1 informers.go starts a cluster-wide informer
// per kind), and only the Secret's first appearance matters, which the
// provider sees on its retry of the failing observation. The Secret holds
// the backends' API keys, so this is composed only when the provider runs
// with --sanitize-secrets, which keeps a Secret's data out of the Object's
// status (object.go, setAtProvider).
func (b builder) filterConfigSecret() *remote.Object {
	return b.wrap(&remote.Manifest[struct{}]{
		APIVersion: "v1",
		Kind:       "Secret",
		Metadata: remote.Meta{
			Name:      names.FilterConfigSecret(b.in.GatewayNamespace, b.in.GatewayName),
			Namespace: b.in.EnvoyGatewayNamespace,
		},
	}, remote.ObserveOnly())
}

// reportingSince is the value of StatusKeyReportingSince: now when the
// observed InferenceGateway's GatewayReady is missing or Unknown (its last
// reconcile failed, and applied nothing), else the value the gateway
// published before, or none. A ModelRoute that waits for a gateway that
// does not report is woken by the watch of this ConfigMap only if the
// ConfigMap changes when the gateway reports again: its status and reason
// alone are often what they were before the failure.
func reportingSince(xr map[string]any, obs map[string]remote.Observed, now time.Time) string {
	if v, err := ReadVerdict(xr); err == nil && !v.Reported {
		return now.UTC().Format(time.RFC3339)
	}
	data, _, _ := unstructured.NestedStringMap(obs[ResourceGatewayStatus].Applied(), "data")
	return data[StatusKeyReportingSince]
}

// statusManifest is a ConfigMap.
type statusManifest struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   remote.Meta       `json:"metadata"`
	Data       map[string]string `json:"data"`
}

// gatewayStatus carries GatewayReady's status and reason to the gateway
// cluster, where every ModelRoute watches it through an observe-only
// Object, so that a ModelRoute hears of its gateway's readiness within a
// watch event. Crossplane does not watch a composite's required resources
// (crossplane v2.2.0 and v2.3.0: a ModelRoute sees its InferenceGateway only when it
// reconciles for another reason), and watching the Envoy Deployment from
// every ModelRoute instead would bring each of its many rollout writes to
// every ModelRoute's circuit breaker. This ConfigMap changes only when
// GatewayReady's status or reason does, or the gateway reports again after
// a reconcile that could not (since, from reportingSince); the message,
// which changes with every rollout counter, stays out of it.
func (b builder) gatewayStatus(c compose.Condition, since string) *remote.Object {
	ready := "False"
	if c.Status {
		ready = "True"
	}
	listener := ListenerHTTP
	if b.spec.TLSEnabled() {
		listener = ListenerHTTPS
	}
	data := map[string]string{
		StatusKeyReady: ready, StatusKeyReason: c.Reason,
		StatusKeyListener: listener, StatusKeyClientCertificate: strconv.FormatBool(b.spec.ClientCert() != nil),
	}
	if since != "" {
		data[StatusKeyReportingSince] = since
	}
	return b.wrap(&statusManifest{
		APIVersion: "v1",
		Kind:       "ConfigMap",
		Metadata:   b.meta(names.GatewayStatus(b.in.GatewayName)),
		Data:       data,
	})
}
