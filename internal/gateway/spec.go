// Package gateway composes an InferenceGateway: the Envoy Gateway and
// EnvoyProxy, the backend-free anchor route that keeps AI Gateway's ext-proc
// sidecar injected, the failover policy, the front door (health check and
// HTTPS redirect), the TLS Secrets copied from the control plane, and an
// observe-only Object on the Envoy Deployment whose rollout decides
// GatewayReady. It composes nothing on a cluster another InferenceGateway
// already serves.
package gateway

import (
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/crossplane/function-sdk-go/errors"

	"github.com/modelplaneai/function-inference-gateway/internal/decode"
)

// Kind is the composite kind this package composes.
const Kind = "InferenceGateway"

// defaultReplicas is how many Envoy replicas run when spec.replicas is unset.
// Two, so that one can be drained or evicted (the PDB allows one
// unavailable) while the other serves.
const defaultReplicas int32 = 2

// Defaults of the client side and of failover.
var (
	// DefaultBufferLimit is how much of a request or response one
	// connection may buffer. AI Gateway's ext-proc buffers whole request
	// and response bodies, and Envoy Gateway's listener default of 32 KiB
	// (gateway v1.8.1 internal/xds/translator/listener.go,
	// tcpListenerPerConnectionBufferLimitBytes) fails any longer prompt or
	// completion. 50Mi is what AI Gateway's getting-started guide sets.
	DefaultBufferLimit = resource.MustParse("50Mi")

	// HTTP/2 flow-control windows that let a 50Mi body through without
	// stalling on the defaults (64 KiB a stream, 1 MiB a connection).
	http2StreamWindow     = resource.MustParse("16Mi")
	http2ConnectionWindow = resource.MustParse("24Mi")

	// defaultRetryTriggers fail a request over to the next priority tier
	// only when the provider cannot have started on it: the connection
	// failed, an HTTP/2 stream was refused, or the upstream reset before
	// the request was sent. Plain "reset" is left out on purpose: a reset
	// after the request went out may follow a generation the provider
	// bills, and a retry would pay for it twice.
	defaultRetryTriggers = []egv1a1.TriggerEnum{egv1a1.ConnectFailure, egv1a1.RefusedStream, egv1a1.ResetBeforeRequest, egv1a1.RetriableStatusCodes}

	// defaultRetryStatusCodes are the answers that say the provider did
	// not process the request: rate limited (429) and unavailable (503).
	defaultRetryStatusCodes = []int32{429, 503}
)

// Failover defaults.
const (
	// DefaultNumRetries is how many retries a request gets; each goes to
	// the next priority tier (numAttemptsPerPriority 1).
	DefaultNumRetries int32 = 3

	// DefaultPanicThreshold is Envoy's own default. Below it Envoy stops
	// trusting its passive health checks and sends to every host of the
	// tier. With a healthy lower tier it never applies (Envoy spills over
	// by priority health first); it matters for a route whose every tier
	// is ejected, where 0 would answer "no healthy upstream" for the whole
	// ejection time. See docs/failover.md.
	DefaultPanicThreshold int32 = 50
)

// retryTriggers are the triggers Envoy Gateway v1.8.1 accepts
// (api/v1alpha1/retry_types.go, TriggerEnum).
var retryTriggers = []egv1a1.TriggerEnum{
	egv1a1.Error5XX, egv1a1.GatewayError, egv1a1.Reset, egv1a1.ResetBeforeRequest, egv1a1.ConnectFailure,
	egv1a1.Retriable4XX, egv1a1.RefusedStream, egv1a1.RetriableStatusCodes, egv1a1.Cancelled,
	egv1a1.DeadlineExceeded, egv1a1.Internal, egv1a1.ResourceExhausted, egv1a1.Unavailable,
}

// Spec is the spec of an InferenceGateway.
//
// The doc comments of Spec, Status and the types under them are the
// InferenceGateway XRD's field descriptions, and their markers its schema:
// internal/xrd generates package/configuration/gateway/xrd.yaml from them.
// The API server enforces the markers; validate checks again what the
// schema cannot say, and what crossplane render (which does not validate an
// XR against its XRD) would otherwise let through.
//
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || has(self.hostname)",message="spec.tls needs spec.hostname: set the hostname the certificate is for"
type Spec struct {
	// The provider-kubernetes ClusterProviderConfig that reaches the
	// gateway's cluster. Immutable: the gateway's objects there have fixed
	// names, and its claim on the cluster is kept in its status.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
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

	// The Envoy pods, tuned for long-lived streaming traffic. Each setting
	// changes the pod template, so changing one rolls Envoy; GatewayReady
	// is False until the rollout is done, and every model stays composed.
	Envoy *Envoy `json:"envoy,omitempty"`

	// TLS to the backends: the client certificate the gateway presents to
	// a backend that asks for one.
	BackendTLS *BackendTLS `json:"backendTLS,omitempty"`
}

// BackendTLS configures TLS from the gateway to its backends.
type BackendTLS struct {
	// A client certificate, issued and renewed by cert-manager on the
	// gateway cluster, which Envoy presents to every backend that asks for
	// one. GatewayReady waits for the first certificate.
	// +kubebuilder:validation:Required
	ClientCertificate *ClientCertificate `json:"clientCertificate,omitempty"`
}

// ClientCertificate says who issues the gateway's client certificate.
//
// +kubebuilder:validation:XValidation:rule="has(self.issuerRef) != has(self.caSecretRef)",message="set exactly one of issuerRef and caSecretRef"
type ClientCertificate struct {
	// A cert-manager Issuer in the gateway namespace, or a ClusterIssuer,
	// on the gateway cluster.
	IssuerRef *IssuerRef `json:"issuerRef,omitempty"`

	// A kubernetes.io/tls Secret holding a CA's certificate and key, on
	// the control plane in the function Input's objectNamespace.
	// provider-kubernetes copies it to the gateway namespace, where a
	// cert-manager CA Issuer signs with it. Its tls.crt is published in
	// status.backendTLS.caCertificate.
	CASecretRef *CertificateRef `json:"caSecretRef,omitempty"`

	// How long a certificate is valid, a Go duration of at least 1h.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(h|m|s))+$`
	// +kubebuilder:default="2160h"
	Duration *string `json:"duration,omitempty"`

	// How long before it expires cert-manager renews a certificate; less
	// than duration.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(h|m|s))+$`
	// +kubebuilder:default="720h"
	RenewBefore *string `json:"renewBefore,omitempty"`
}

// IssuerRef names a cert-manager issuer.
type IssuerRef struct {
	// The issuer's name.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// Issuer (in the gateway namespace) or ClusterIssuer.
	// +kubebuilder:validation:Enum=Issuer;ClusterIssuer
	// +kubebuilder:default=Issuer
	Kind string `json:"kind,omitempty"`
}

// Envoy tunes the Envoy pods.
type Envoy struct {
	// How long a terminating Envoy pod keeps serving its connections, so a
	// streaming completion finishes during a rollout; a duration from 1s to
	// 1h. Envoy Gateway gives the pod this plus 300s to terminate.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(h|m|s|ms)){1,4}$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,5}(h|m|s|ms)){1,4}$') || (duration(self) >= duration('1s') && duration(self) <= duration('1h'))",message="spec.envoy.drainTimeout must be from 1s to 1h: Envoy Gateway gives the pod this plus 300s to terminate, and a rollout waits that long for every old pod"
	// +kubebuilder:default="300s"
	DrainTimeout *string `json:"drainTimeout,omitempty"`

	// Spreads the Envoy pods across nodes and zones.
	Spread *Spread `json:"spread,omitempty"`

	// A JSON access log on Envoy's stdout: caller, model, backend and token
	// counts of each request.
	AccessLog *AccessLog `json:"accessLog,omitempty"`
}

// Spread spreads the Envoy pods across nodes and zones.
type Spread struct {
	// ScheduleAnyway prefers spreading; DoNotSchedule requires it.
	// +kubebuilder:validation:Enum=ScheduleAnyway;DoNotSchedule
	// +kubebuilder:default=ScheduleAnyway
	WhenUnsatisfiable string `json:"whenUnsatisfiable,omitempty"`
}

// AccessLog configures Envoy's access log.
type AccessLog struct {
	// false leaves the access log to the GatewayClass's EnvoyProxy.
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`
}

// Connection tunes the gateway's client connections.
type Connection struct {
	// Schemaless drops resource.Quantity's own int-or-string schema: the
	// field takes the string of a binary size.

	// The most one connection may buffer. AI Gateway buffers whole request
	// and response bodies, so this bounds the longest prompt and
	// completion. Envoy Gateway's own default is 32Ki.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^[1-9][0-9]*(Ki|Mi|Gi)?$`
	// +kubebuilder:default="50Mi"
	BufferLimit *resource.Quantity `json:"bufferLimit,omitempty"`
}

// Failover tunes retries across priority tiers and passive health checks.
type Failover struct {
	// Retries of a request; each goes to the next priority tier.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	// +kubebuilder:default=3
	NumRetries *int32 `json:"numRetries,omitempty"`

	// The failures that are retried. The defaults retry only what the
	// provider cannot have started on: connect failures, refused streams,
	// resets before the request was sent, and 429 and 503 answers.
	RetryOn *RetryOn `json:"retryOn,omitempty"`

	// Percent of healthy hosts in a tier below which Envoy ignores passive
	// health checks and sends to every host. 0 trusts them always: a route
	// whose every tier is ejected then answers "no healthy upstream" for
	// 30s.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=50
	PanicThreshold *int32 `json:"panicThreshold,omitempty"`
}

// RetryOn lists the failures that are retried.
type RetryOn struct {
	// The enum is retryTriggers, which validateFailover checks too.

	// Envoy retry conditions, as Envoy Gateway names them.
	// +kubebuilder:validation:MaxItems=13
	// +kubebuilder:validation:items:Enum="5xx";gateway-error;reset;reset-before-request;connect-failure;retriable-4xx;refused-stream;retriable-status-codes;cancelled;deadline-exceeded;internal;resource-exhausted;unavailable
	// +listType=set
	Triggers []string `json:"triggers,omitempty"`

	// The HTTP response codes that are retried.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Minimum=100
	// +kubebuilder:validation:items:Maximum=599
	// +listType=set
	HTTPStatusCodes []int32 `json:"httpStatusCodes,omitempty"`
}

// TLS configures TLS termination.
type TLS struct {
	// kubernetes.io/tls Secrets on the control plane, in the function
	// Input's objectNamespace. provider-kubernetes copies each into the
	// gateway namespace on the gateway cluster under the same name.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=name
	CertificateRefs []CertificateRef `json:"certificateRefs,omitempty"`
}

// CertificateRef names a kubernetes.io/tls Secret.
type CertificateRef struct {
	// The Secret's name.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name,omitempty"`
}

// Status is what the function writes into an InferenceGateway's status.
type Status struct {
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

	// Winner says how a gateway claims its cluster with this.

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

// ReadSpec decodes and checks the spec of an observed InferenceGateway.
func ReadSpec(xr map[string]any) (*Spec, error) {
	s := &Spec{}
	if err := decode.Strict("InferenceGateway", "spec", xr["spec"], s, decode.CrossplaneSpecField); err != nil {
		return nil, err
	}
	err := s.validate()
	return s, err
}

// implied names every composition resource the spec implies: Resources,
// and with TLS the redirect route and a copied Secret per certificateRef.
func (s *Spec) implied() map[string]bool {
	out := make(map[string]bool, len(Resources)+2)
	for _, n := range Resources {
		out[n] = true
	}
	if c := s.clientCert(); c != nil {
		out[ResourceClientCertificate] = true
		if c.CASecretRef != nil {
			out[ResourceClientCASecret] = true
			out[ResourceClientIssuer] = true
		}
	}
	if s.tlsEnabled() {
		out[ResourceRedirectRoute] = true
		for _, r := range s.TLS.CertificateRefs {
			out[ResourceTLSSecretPrefix+r.Name] = true
		}
	}
	return out
}

// tlsEnabled reports whether the gateway terminates TLS.
func (s *Spec) tlsEnabled() bool { return s.TLS != nil }

// replicaCount is spec.replicas or its default.
func (s *Spec) replicaCount() int32 {
	if s.Replicas == nil {
		return defaultReplicas
	}
	return *s.Replicas
}

// bufferLimit is spec.connection.bufferLimit or its default.
func (s *Spec) bufferLimit() resource.Quantity {
	if s.Connection == nil || s.Connection.BufferLimit == nil {
		return DefaultBufferLimit
	}
	return *s.Connection.BufferLimit
}

// numRetries is spec.failover.numRetries or its default.
func (s *Spec) numRetries() int32 {
	if s.Failover == nil || s.Failover.NumRetries == nil {
		return DefaultNumRetries
	}
	return *s.Failover.NumRetries
}

// panicThreshold is spec.failover.panicThreshold or its default.
func (s *Spec) panicThreshold() int32 {
	if s.Failover == nil || s.Failover.PanicThreshold == nil {
		return DefaultPanicThreshold
	}
	return *s.Failover.PanicThreshold
}

// retryOn is what is retried: spec.failover.retryOn, each list defaulted
// on its own. Status codes only take effect with the
// retriable-status-codes trigger, so that trigger is added whenever codes
// are listed.
func (s *Spec) retryOn() *egv1a1.RetryOn {
	triggers, codes := defaultRetryTriggers, defaultRetryStatusCodes
	if s.Failover != nil && s.Failover.RetryOn != nil {
		if t := s.Failover.RetryOn.Triggers; len(t) > 0 {
			triggers = make([]egv1a1.TriggerEnum, len(t))
			for i, v := range t {
				triggers[i] = egv1a1.TriggerEnum(v)
			}
		}
		if c := s.Failover.RetryOn.HTTPStatusCodes; c != nil {
			codes = c
		}
	}
	out := &egv1a1.RetryOn{Triggers: slices.Clone(triggers)}
	for _, c := range codes {
		out.HTTPStatusCodes = append(out.HTTPStatusCodes, egv1a1.HTTPStatus(c))
	}
	if len(codes) > 0 && !slices.Contains(out.Triggers, egv1a1.RetriableStatusCodes) {
		out.Triggers = append(out.Triggers, egv1a1.RetriableStatusCodes)
	}
	return out
}

func (s *Spec) validate() error {
	if strings.TrimSpace(s.ProviderConfigName) == "" {
		return errors.New("cannot compose InferenceGateway: spec.providerConfigName is required; set it to the provider-kubernetes ClusterProviderConfig that reaches the gateway's cluster")
	}
	if s.Replicas != nil && *s.Replicas < 0 {
		return errors.Errorf("cannot compose InferenceGateway: spec.replicas is %d; set it to 0 or more", *s.Replicas)
	}
	if s.Hostname != "" {
		if errs := validation.IsDNS1123Subdomain(s.Hostname); len(errs) > 0 {
			return errors.Errorf("cannot compose InferenceGateway: spec.hostname %q is not a hostname (%s); set a DNS name such as llm.example.com", s.Hostname, strings.Join(errs, "; "))
		}
	}
	for _, check := range []func() error{s.validateConnection, s.validateFailover, s.validateEnvoy, s.validateAuth, s.validateBackendTLS} {
		if err := check(); err != nil {
			return err
		}
	}
	if s.TLS != nil {
		if s.Hostname == "" {
			return errors.New("cannot compose InferenceGateway: spec.tls needs spec.hostname; set the hostname the certificate is for")
		}
		if len(s.TLS.CertificateRefs) == 0 {
			return errors.New("cannot compose InferenceGateway: spec.tls.certificateRefs is empty; name at least one TLS Secret in the gateway namespace")
		}
		for i, r := range s.TLS.CertificateRefs {
			if r.Name == "" {
				return errors.Errorf("cannot compose InferenceGateway: spec.tls.certificateRefs[%d].name is empty; name a TLS Secret", i)
			}
		}
	}
	return nil
}

// Envoy defaults.
const (
	// defaultDrainTimeout lets a streaming completion finish while its
	// Envoy pod is replaced: Envoy Gateway's own default is 60 s
	// (gateway v1.8.1 api/v1alpha1/envoyproxy_types.go, ShutdownConfig),
	// shorter than many completions. Modelplane uses 300 s.
	defaultDrainTimeout = "300s"

	// maxDrainTimeout bounds the drain: Envoy Gateway gives the pod a
	// termination grace period of the drain timeout plus 300 s
	// (internal/infrastructure/kubernetes/proxy/resource_provider.go,
	// expectedTerminationGracePeriodSeconds), and a rollout waits that long
	// for every old pod.
	maxDrainTimeout = time.Hour

	// defaultWhenUnsatisfiable prefers spreading but never leaves a pod
	// pending for want of another node or zone.
	defaultWhenUnsatisfiable = corev1.ScheduleAnyway
)

// drainTimeout is spec.envoy.drainTimeout or its default.
func (s *Spec) drainTimeout() string {
	if s.Envoy == nil || s.Envoy.DrainTimeout == nil {
		return defaultDrainTimeout
	}
	return *s.Envoy.DrainTimeout
}

// whenUnsatisfiable is spec.envoy.spread.whenUnsatisfiable or its default.
func (s *Spec) whenUnsatisfiable() corev1.UnsatisfiableConstraintAction {
	if s.Envoy == nil || s.Envoy.Spread == nil || s.Envoy.Spread.WhenUnsatisfiable == "" {
		return defaultWhenUnsatisfiable
	}
	return corev1.UnsatisfiableConstraintAction(s.Envoy.Spread.WhenUnsatisfiable)
}

// accessLogEnabled is spec.envoy.accessLog.enabled or its default, true.
func (s *Spec) accessLogEnabled() bool {
	if s.Envoy == nil || s.Envoy.AccessLog == nil || s.Envoy.AccessLog.Enabled == nil {
		return true
	}
	return *s.Envoy.AccessLog.Enabled
}

// gatewayDuration is Gateway API's Duration (gateway-api v1.5.1
// apis/v1/shared_types.go, Duration), which the EnvoyProxy's drainTimeout
// must match; Envoy Gateway then parses it with time.ParseDuration.
var gatewayDuration = regexp.MustCompile(`^([0-9]{1,5}(h|m|s|ms)){1,4}$`)

func (s *Spec) validateEnvoy() error {
	if s.Envoy == nil {
		return nil
	}
	if d := s.Envoy.DrainTimeout; d != nil {
		v, err := time.ParseDuration(*d)
		if !gatewayDuration.MatchString(*d) || err != nil || v < time.Second || v > maxDrainTimeout {
			return errors.Errorf("cannot compose InferenceGateway: spec.envoy.drainTimeout %q is not a duration from 1s to 1h; set one such as the default %s", *d, defaultDrainTimeout)
		}
	}
	if sp := s.Envoy.Spread; sp != nil && sp.WhenUnsatisfiable != "" {
		switch corev1.UnsatisfiableConstraintAction(sp.WhenUnsatisfiable) {
		case corev1.ScheduleAnyway, corev1.DoNotSchedule:
		default:
			return errors.Errorf("cannot compose InferenceGateway: spec.envoy.spread.whenUnsatisfiable is %q; set ScheduleAnyway (the default) or DoNotSchedule", sp.WhenUnsatisfiable)
		}
	}
	return nil
}

// minBufferLimit is Envoy Gateway's own default: a smaller limit only
// breaks more requests.
const minBufferLimit = 32 * 1024

func (s *Spec) validateConnection() error {
	if s.Connection == nil || s.Connection.BufferLimit == nil {
		return nil
	}
	q := s.Connection.BufferLimit
	// Envoy Gateway turns the limit into a uint32 and rejects the whole
	// ClientTrafficPolicy when it does not fit (gateway v1.8.1
	// internal/gatewayapi/clienttrafficpolicy.go, BufferLimit).
	v, ok := q.AsInt64()
	if !ok || v < minBufferLimit || v > math.MaxUint32 {
		return errors.Errorf("cannot compose InferenceGateway: spec.connection.bufferLimit %s is out of range; set a size from 32Ki to 4095Mi, such as the default %s", q.String(), DefaultBufferLimit.String())
	}
	return nil
}

func (s *Spec) validateFailover() error {
	f := s.Failover
	if f == nil {
		return nil
	}
	if f.NumRetries != nil && (*f.NumRetries < 0 || *f.NumRetries > 10) {
		return errors.Errorf("cannot compose InferenceGateway: spec.failover.numRetries is %d; set 0 to 10", *f.NumRetries)
	}
	if f.PanicThreshold != nil && (*f.PanicThreshold < 0 || *f.PanicThreshold > 100) {
		return errors.Errorf("cannot compose InferenceGateway: spec.failover.panicThreshold is %d; set a percentage from 0 to 100", *f.PanicThreshold)
	}
	if f.RetryOn == nil {
		return nil
	}
	for i, t := range f.RetryOn.Triggers {
		if !slices.Contains(retryTriggers, egv1a1.TriggerEnum(t)) {
			return errors.Errorf("cannot compose InferenceGateway: spec.failover.retryOn.triggers[%d] %q is not a trigger Envoy Gateway knows; use one of %v", i, t, retryTriggers)
		}
	}
	for i, c := range f.RetryOn.HTTPStatusCodes {
		// Envoy Gateway's HTTPStatus (api/v1alpha1/shared_types.go).
		if c < 100 || c > 599 {
			return errors.Errorf("cannot compose InferenceGateway: spec.failover.retryOn.httpStatusCodes[%d] is %d; use an HTTP status from 100 to 599, such as 429 or 503", i, c)
		}
	}
	return nil
}
