// Package gateway composes an InferenceGateway: the Envoy Gateway Gateway and
// EnvoyProxy, the backend-free anchor route that keeps AI Gateway's ext-proc
// sidecar injected, the failover policy, and an observe-only Object on the
// Envoy Deployment whose rollout decides GatewayReady.
package gateway

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/crossplane/function-sdk-go/errors"

	"github.com/modelplaneai/function-inference-gateway/internal/decode"
)

// Kind is the composite kind this package composes.
const Kind = "InferenceGateway"

// DefaultReplicas is how many Envoy replicas run when spec.replicas is unset.
// Two, so that one can be drained or evicted (the PDB allows one
// unavailable) while the other serves.
const DefaultReplicas int32 = 2

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
	return s, s.validate()
}

// TLSEnabled reports whether the gateway terminates TLS.
func (s *Spec) TLSEnabled() bool { return s.TLS != nil }

// ReplicaCount is spec.replicas or its default.
func (s *Spec) ReplicaCount() int32 {
	if s.Replicas == nil {
		return DefaultReplicas
	}
	return *s.Replicas
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
