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

	// defaultPanicThreshold is Envoy's own default. Below it Envoy stops
	// trusting its passive health checks and sends to every host of the
	// tier. With a healthy lower tier it never applies (Envoy spills over
	// by priority health first); it matters for a route whose every tier
	// is ejected, where 0 would answer "no healthy upstream" for the whole
	// ejection time. See the README's failover section.
	defaultPanicThreshold int32 = 50
)

// retryTriggers are the triggers Envoy Gateway v1.8.1 accepts
// (api/v1alpha1/retry_types.go, TriggerEnum).
var retryTriggers = []egv1a1.TriggerEnum{
	egv1a1.Error5XX, egv1a1.GatewayError, egv1a1.Reset, egv1a1.ResetBeforeRequest, egv1a1.ConnectFailure,
	egv1a1.Retriable4XX, egv1a1.RefusedStream, egv1a1.RetriableStatusCodes, egv1a1.Cancelled,
	egv1a1.DeadlineExceeded, egv1a1.Internal, egv1a1.ResourceExhausted, egv1a1.Unavailable,
}

// Spec is the spec of an InferenceGateway.
type Spec struct {
	// ProviderConfigName names the provider-kubernetes ClusterProviderConfig
	// that reaches the gateway's cluster.
	ProviderConfigName string `json:"providerConfigName,omitempty"`

	// Replicas of Envoy.
	Replicas *int32 `json:"replicas,omitempty"`

	// ClassName is the GatewayClass; the Input's default when empty.
	ClassName string `json:"className,omitempty"`

	// Hostname the gateway serves, used by the https listener and in the
	// endpoint URLs.
	Hostname string `json:"hostname,omitempty"`

	// TLS makes the Gateway terminate TLS on an https listener.
	TLS *TLS `json:"tls,omitempty"`

	// Connection tunes the gateway's client connections.
	Connection *Connection `json:"connection,omitempty"`

	// Failover tunes how requests fail over between priority tiers.
	Failover *Failover `json:"failover,omitempty"`

	// Auth makes callers authenticate; without it the gateway is open.
	Auth *Auth `json:"auth,omitempty"`

	// Envoy tunes the Envoy pods for long-lived streaming traffic.
	Envoy *Envoy `json:"envoy,omitempty"`
}

// Envoy tunes the Envoy pods. Each setting changes their template, so a
// change rolls Envoy (and GatewayReady is False until the rollout is done).
type Envoy struct {
	// DrainTimeout is how long a terminating Envoy keeps serving the
	// connections it has, a Gateway API duration such as 300s.
	DrainTimeout *string `json:"drainTimeout,omitempty"`

	// Spread spreads the Envoy pods across nodes and zones.
	Spread *Spread `json:"spread,omitempty"`

	// AccessLog writes one JSON line per request to Envoy's stdout.
	AccessLog *AccessLog `json:"accessLog,omitempty"`
}

// Spread spreads the Envoy pods across nodes and zones.
type Spread struct {
	// WhenUnsatisfiable is ScheduleAnyway (prefer spreading) or
	// DoNotSchedule (require it).
	WhenUnsatisfiable string `json:"whenUnsatisfiable,omitempty"`
}

// AccessLog configures Envoy's access log.
type AccessLog struct {
	// Enabled writes the JSON access log; false leaves the GatewayClass's.
	Enabled *bool `json:"enabled,omitempty"`
}

// Connection tunes the gateway's client connections.
type Connection struct {
	// BufferLimit is the most one connection may buffer, a Kubernetes
	// quantity such as 50Mi. It bounds the largest request and response
	// body, because AI Gateway buffers whole bodies.
	BufferLimit *resource.Quantity `json:"bufferLimit,omitempty"`
}

// Failover tunes retries across priority tiers and passive health checks.
type Failover struct {
	// NumRetries is how many times a request is retried, each time on the
	// next priority tier.
	NumRetries *int32 `json:"numRetries,omitempty"`

	// RetryOn says which failures are retried.
	RetryOn *RetryOn `json:"retryOn,omitempty"`

	// PanicThreshold is the percentage of healthy hosts below which Envoy
	// ignores passive health checks; 0 never ignores them.
	PanicThreshold *int32 `json:"panicThreshold,omitempty"`
}

// RetryOn lists the failures that are retried.
type RetryOn struct {
	// Triggers are Envoy retry conditions, as Envoy Gateway names them.
	Triggers []string `json:"triggers,omitempty"`

	// HTTPStatusCodes are the response codes that are retried.
	HTTPStatusCodes []int32 `json:"httpStatusCodes,omitempty"`
}

// TLS configures TLS termination.
type TLS struct {
	// CertificateRefs name TLS Secrets in the gateway's namespace on the
	// gateway cluster.
	CertificateRefs []CertificateRef `json:"certificateRefs,omitempty"`
}

// CertificateRef names a kubernetes.io/tls Secret.
type CertificateRef struct {
	Name string `json:"name,omitempty"`
}

// Status is what the function writes into an InferenceGateway's status.
type Status struct {
	Address   string     `json:"address,omitempty"`
	Endpoints *Endpoints `json:"endpoints,omitempty"`
	Rollout   *Rollout   `json:"rollout,omitempty"`
	// Auth says whether callers must authenticate, and with what.
	Auth *AuthStatus `json:"auth,omitempty"`
	// ExtProcMarker records the rollout the function may write its own
	// ext-proc marker for, while it waits to (marker.go).
	ExtProcMarker *MarkerStatus `json:"extProcMarker,omitempty"`
	// NotReadySince is when GatewayReady last turned from True (or
	// nothing) to False; absent while it is True. The back-off of the
	// gateway's requeue runs from it (compose.NotReadySince).
	NotReadySince *metav1.Time `json:"notReadySince,omitempty"`
	// ClusterGateway is the InferenceGateway this one saw compose the
	// gateway on its cluster: its own name once it has (its claim, see
	// Winner).
	ClusterGateway string `json:"clusterGateway,omitempty"`
}

// Endpoints are the base URLs clients configure in their SDKs.
type Endpoints struct {
	OpenAI    string `json:"openAI,omitempty"`
	Anthropic string `json:"anthropic,omitempty"`
}

// Rollout holds the Envoy Deployment's counters as last observed.
type Rollout struct {
	Generation         int64 `json:"generation"`
	ObservedGeneration int64 `json:"observedGeneration"`
	Replicas           int32 `json:"replicas"`
	UpdatedReplicas    int32 `json:"updatedReplicas"`
	AvailableReplicas  int32 `json:"availableReplicas"`
}

// ReadSpec decodes and checks the spec of an observed InferenceGateway.
func ReadSpec(xr map[string]any) (*Spec, error) {
	s := &Spec{}
	if err := decode.Into("InferenceGateway", "spec", xr["spec"], s); err != nil {
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
	if s.tlsEnabled() {
		out[ResourceRedirectRoute] = true
		for _, r := range s.TLS.CertificateRefs {
			out[resourceTLSSecretPrefix+r.Name] = true
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
		return defaultPanicThreshold
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
	if err := s.validateConnection(); err != nil {
		return err
	}
	if err := s.validateFailover(); err != nil {
		return err
	}
	if err := s.validateEnvoy(); err != nil {
		return err
	}
	if err := s.validateAuth(); err != nil {
		return err
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
