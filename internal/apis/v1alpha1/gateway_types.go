package v1alpha1

import (
	"time"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The types under an InferenceGateway's spec, but for caller
// authentication (gateway_auth.go) and TLS to the backends
// (gateway_backendtls.go), each with the defaults of its fields.

// MaxCertificateRefs is the most Secrets spec.tls.certificateRefs may
// name (its +kubebuilder:validation:MaxItems).
const MaxCertificateRefs = 8

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

// DefaultBufferLimit is how much of a request or response one connection
// may buffer. AI Gateway's ext-proc buffers whole request and response
// bodies, and Envoy Gateway's listener default of 32 KiB (gateway v1.8.3
// internal/xds/translator/listener.go,
// tcpListenerPerConnectionBufferLimitBytes) fails any longer prompt or
// completion. 50Mi is what AI Gateway's getting-started guide sets.
var DefaultBufferLimit = resource.MustParse("50Mi")

// MinBufferLimit is Envoy Gateway's own default: a smaller limit only
// breaks more requests.
const MinBufferLimit = 32 * 1024

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

// Defaults of retryOn, which has no schema default: each list is defaulted
// on its own (InferenceGatewaySpec.RetryOn).
var (
	// DefaultRetryTriggers fail a request over to the next priority tier
	// only when the provider cannot have started on it: the connection
	// failed, an HTTP/2 stream was refused, or the upstream reset before
	// the request was sent. Plain "reset" is left out on purpose: a reset
	// after the request went out may follow a generation the provider
	// bills, and a retry would pay for it twice.
	DefaultRetryTriggers = []egv1a1.TriggerEnum{egv1a1.ConnectFailure, egv1a1.RefusedStream, egv1a1.ResetBeforeRequest, egv1a1.RetriableStatusCodes}

	// DefaultRetryStatusCodes are the answers that say the provider did
	// not process the request: rate limited (429) and unavailable (503).
	DefaultRetryStatusCodes = []int32{429, 503}
)

// RetryTriggers are the triggers Envoy Gateway v1.8.3 accepts
// (api/v1alpha1/retry_types.go, TriggerEnum).
var RetryTriggers = []egv1a1.TriggerEnum{
	egv1a1.Error5XX, egv1a1.GatewayError, egv1a1.Reset, egv1a1.ResetBeforeRequest, egv1a1.ConnectFailure,
	egv1a1.Retriable4XX, egv1a1.RefusedStream, egv1a1.RetriableStatusCodes, egv1a1.Cancelled,
	egv1a1.DeadlineExceeded, egv1a1.Internal, egv1a1.ResourceExhausted, egv1a1.Unavailable,
}

// MaxRetryStatusCodes is the most codes spec.failover.retryOn.httpStatusCodes
// may list (its +kubebuilder:validation:MaxItems).
const MaxRetryStatusCodes = 16

// RetryOn lists the failures that are retried.
type RetryOn struct {
	// The enum is RetryTriggers, which Validate checks too.

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

// Envoy defaults and bounds.
const (
	// DefaultDrainTimeout lets a streaming completion finish while its
	// Envoy pod is replaced: Envoy Gateway's own default is 60 s
	// (gateway v1.8.3 api/v1alpha1/envoyproxy_types.go, ShutdownConfig),
	// shorter than many completions. Modelplane uses 300 s.
	DefaultDrainTimeout = "300s"

	// MaxDrainTimeout bounds the drain: Envoy Gateway gives the pod a
	// termination grace period of the drain timeout plus 300 s
	// (internal/infrastructure/kubernetes/proxy/resource_provider.go,
	// expectedTerminationGracePeriodSeconds), and a rollout waits that long
	// for every old pod.
	MaxDrainTimeout = time.Hour

	// MaxServiceAccountAnnotations is Gateway API's limit on a Gateway's
	// infrastructure annotations, which carry them (gateway-api v1.5.1
	// apis/v1/gateway_types.go, GatewayInfrastructure).
	MaxServiceAccountAnnotations = 8

	// DefaultWhenUnsatisfiable prefers spreading but never leaves a pod
	// pending for want of another node or zone.
	DefaultWhenUnsatisfiable = corev1.ScheduleAnyway

	// DefaultAccessLogEnabled turns Envoy's JSON access log on.
	DefaultAccessLogEnabled = true
)

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

	// The ServiceAccount the Envoy pods run as, which a cloud's workload
	// identity binds a role to (EKS Pod Identity by its name; IRSA and GKE
	// Workload Identity by its annotations, below). Envoy Gateway creates
	// it beside the Envoy pods, in its own namespace, and deletes it with
	// the gateway's Envoy; unset,
	// the Envoy pods run as the one Envoy Gateway names after them.
	// Changing it rolls the Envoy pods once.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ServiceAccountName *string `json:"serviceAccountName,omitempty"`

	// Annotations for the Envoy pods' ServiceAccount, such as IRSA's
	// eks.amazonaws.com/role-arn or GKE's iam.gke.io/gcp-service-account;
	// up to 8. Envoy Gateway puts them on every resource it creates for
	// the gateway, the Envoy pods included, so changing them rolls the
	// Envoy pods once, which then start with the identity. Keys and
	// values are checked as Kubernetes checks annotations.
	// +kubebuilder:validation:MaxProperties=8
	ServiceAccountAnnotations map[string]string `json:"serviceAccountAnnotations,omitempty"`
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
