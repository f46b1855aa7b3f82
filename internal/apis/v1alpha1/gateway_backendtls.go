package v1alpha1

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/crossplane/function-sdk-go/errors"
)

// TLS from the gateway to its backends: the types under an
// InferenceGateway's spec.backendTLS, their defaults and their checks.
// internal/gateway composes the client certificate.

// Client certificate defaults. cert-manager's own default duration is the
// same 90 days (cert-manager v1.21.2 pkg/apis/certmanager/v1/const.go,
// DefaultCertificateDuration); renewing a third of the way before the end
// leaves a month to notice an issuer that stopped issuing.
const (
	// DefaultClientCertDuration is clientCertificate.duration when unset.
	DefaultClientCertDuration = "2160h"
	// DefaultClientCertRenewBefore is clientCertificate.renewBefore when
	// unset.
	DefaultClientCertRenewBefore = "720h"
	// MinClientCertDuration is cert-manager's floor (cert-manager v1.21.2
	// internal/apis/certmanager/validation/certificate.go,
	// ValidateDuration: MinimumCertificateDuration).
	MinClientCertDuration = time.Hour
	// MinClientCertRenewBefore is cert-manager's floor too
	// (MinimumRenewBefore).
	MinClientCertRenewBefore = 5 * time.Minute
)

// Kinds of cert-manager issuers a clientCertificate may name.
const (
	// KindIssuer is a namespaced cert-manager Issuer.
	KindIssuer = "Issuer"
	// KindClusterIssuer is a cert-manager ClusterIssuer.
	KindClusterIssuer = "ClusterIssuer"
	// DefaultIssuerKind is issuerRef.kind when unset.
	DefaultIssuerKind = KindIssuer
)

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
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name,omitempty"`
	// Issuer (in the gateway namespace) or ClusterIssuer.
	// +kubebuilder:validation:Enum=Issuer;ClusterIssuer
	// +kubebuilder:default=Issuer
	Kind string `json:"kind,omitempty"`
}

// ClientCert is spec.backendTLS.clientCertificate, or nil.
func (s *InferenceGatewaySpec) ClientCert() *ClientCertificate {
	if s.BackendTLS == nil {
		return nil
	}
	return s.BackendTLS.ClientCertificate
}

// Durations are the certificate's duration and renewBefore, defaulted.
func (c *ClientCertificate) Durations() (time.Duration, time.Duration, error) {
	d, r := DefaultClientCertDuration, DefaultClientCertRenewBefore
	if c.Duration != nil {
		d = *c.Duration
	}
	if c.RenewBefore != nil {
		r = *c.RenewBefore
	}
	dv, err := time.ParseDuration(d)
	if err != nil {
		return 0, 0, errors.Errorf("cannot compose InferenceGateway: spec.backendTLS.clientCertificate.duration %q is not a duration; set one such as %s", d, DefaultClientCertDuration)
	}
	rv, err := time.ParseDuration(r)
	if err != nil {
		return 0, 0, errors.Errorf("cannot compose InferenceGateway: spec.backendTLS.clientCertificate.renewBefore %q is not a duration; set one such as %s", r, DefaultClientCertRenewBefore)
	}
	return dv, rv, nil
}

// validateBackendTLS checks what cert-manager would otherwise refuse only
// once the Certificate reaches the gateway cluster.
func (s *InferenceGatewaySpec) validateBackendTLS() error {
	if s.BackendTLS == nil {
		return nil
	}
	c := s.BackendTLS.ClientCertificate
	if c == nil {
		return errors.New("cannot compose InferenceGateway: spec.backendTLS.clientCertificate is required; name an issuerRef or a caSecretRef")
	}
	if (c.IssuerRef == nil) == (c.CASecretRef == nil) {
		return errors.New("cannot compose InferenceGateway: spec.backendTLS.clientCertificate needs exactly one of issuerRef and caSecretRef")
	}
	if err := c.validateRefs(); err != nil {
		return err
	}
	d, r, err := c.Durations()
	if err != nil {
		return err
	}
	// cert-manager refuses both (cert-manager v1.21.2
	// internal/apis/certmanager/validation/certificate.go,
	// ValidateDuration).
	if d < MinClientCertDuration {
		return errors.Errorf("cannot compose InferenceGateway: spec.backendTLS.clientCertificate.duration %s is under cert-manager's minimum of 1h", d)
	}
	if r < MinClientCertRenewBefore {
		return errors.Errorf("cannot compose InferenceGateway: spec.backendTLS.clientCertificate.renewBefore %s is under cert-manager's minimum of 5m", r)
	}
	if r >= d {
		return errors.Errorf("cannot compose InferenceGateway: spec.backendTLS.clientCertificate.renewBefore %s is not less than its duration %s; cert-manager would refuse the Certificate", r, d)
	}
	return nil
}

// validateRefs checks the issuerRef or caSecretRef: names cert-manager and
// the API server take.
func (c *ClientCertificate) validateRefs() error {
	if r := c.IssuerRef; r != nil {
		if r.Name == "" {
			return errors.New("cannot compose InferenceGateway: spec.backendTLS.clientCertificate.issuerRef.name is empty; name a cert-manager Issuer or ClusterIssuer")
		}
		if errs := validation.IsDNS1123Subdomain(r.Name); len(errs) > 0 {
			return errors.Errorf("cannot compose InferenceGateway: spec.backendTLS.clientCertificate.issuerRef.name %q is not an issuer name (%s); name a cert-manager Issuer or ClusterIssuer", r.Name, strings.Join(errs, "; "))
		}
		if r.Kind != "" && r.Kind != KindIssuer && r.Kind != KindClusterIssuer {
			return errors.Errorf("cannot compose InferenceGateway: spec.backendTLS.clientCertificate.issuerRef.kind is %q; set Issuer or ClusterIssuer", r.Kind)
		}
	}
	if r := c.CASecretRef; r != nil {
		if r.Name == "" {
			return errors.New("cannot compose InferenceGateway: spec.backendTLS.clientCertificate.caSecretRef.name is empty; name a kubernetes.io/tls Secret")
		}
		if errs := validation.IsDNS1123Subdomain(r.Name); len(errs) > 0 {
			return errors.Errorf("cannot compose InferenceGateway: spec.backendTLS.clientCertificate.caSecretRef.name %q is not a Secret name (%s); name a kubernetes.io/tls Secret", r.Name, strings.Join(errs, "; "))
		}
	}
	return nil
}
