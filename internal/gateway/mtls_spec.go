package gateway

import (
	"time"

	"github.com/crossplane/function-sdk-go/errors"
)

// Client certificate defaults. cert-manager's own default duration is the
// same 90 days (cert-manager v1.21.2 pkg/apis/certmanager/v1/const.go,
// DefaultCertificateDuration); renewing a third of the way before the end
// leaves a month to notice an issuer that stopped issuing.
const (
	defaultClientCertDuration    = "2160h"
	defaultClientCertRenewBefore = "720h"
	// minClientCertDuration is cert-manager's floor (cert-manager v1.21.2
	// internal/apis/certmanager/validation/certificate.go,
	// ValidateDuration: MinimumCertificateDuration).
	minClientCertDuration = time.Hour
	// minClientCertRenewBefore is cert-manager's floor too
	// (MinimumRenewBefore).
	minClientCertRenewBefore = 5 * time.Minute
)

// Kinds of cert-manager issuers a clientCertificate may name.
const (
	issuerKind        = "Issuer"
	clusterIssuerKind = "ClusterIssuer"
)

// clientCert is spec.backendTLS.clientCertificate, or nil.
func (s *Spec) clientCert() *ClientCertificate {
	if s.BackendTLS == nil {
		return nil
	}
	return s.BackendTLS.ClientCertificate
}

// durations are the certificate's duration and renewBefore, defaulted.
func (c *ClientCertificate) durations() (time.Duration, time.Duration, error) {
	d, r := defaultClientCertDuration, defaultClientCertRenewBefore
	if c.Duration != nil {
		d = *c.Duration
	}
	if c.RenewBefore != nil {
		r = *c.RenewBefore
	}
	dv, err := time.ParseDuration(d)
	if err != nil {
		return 0, 0, errors.Errorf("cannot compose InferenceGateway: spec.backendTLS.clientCertificate.duration %q is not a duration; set one such as %s", d, defaultClientCertDuration)
	}
	rv, err := time.ParseDuration(r)
	if err != nil {
		return 0, 0, errors.Errorf("cannot compose InferenceGateway: spec.backendTLS.clientCertificate.renewBefore %q is not a duration; set one such as %s", r, defaultClientCertRenewBefore)
	}
	return dv, rv, nil
}

// validateBackendTLS checks what cert-manager would otherwise refuse only
// once the Certificate reaches the gateway cluster.
func (s *Spec) validateBackendTLS() error {
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
	if r := c.IssuerRef; r != nil {
		if r.Name == "" {
			return errors.New("cannot compose InferenceGateway: spec.backendTLS.clientCertificate.issuerRef.name is empty; name a cert-manager Issuer or ClusterIssuer")
		}
		if r.Kind != "" && r.Kind != issuerKind && r.Kind != clusterIssuerKind {
			return errors.Errorf("cannot compose InferenceGateway: spec.backendTLS.clientCertificate.issuerRef.kind is %q; set Issuer or ClusterIssuer", r.Kind)
		}
	}
	if r := c.CASecretRef; r != nil && r.Name == "" {
		return errors.New("cannot compose InferenceGateway: spec.backendTLS.clientCertificate.caSecretRef.name is empty; name a kubernetes.io/tls Secret")
	}
	d, r, err := c.durations()
	if err != nil {
		return err
	}
	// cert-manager refuses both (cert-manager v1.21.2
	// internal/apis/certmanager/validation/certificate.go,
	// ValidateDuration).
	if d < minClientCertDuration {
		return errors.Errorf("cannot compose InferenceGateway: spec.backendTLS.clientCertificate.duration %s is under cert-manager's minimum of 1h", d)
	}
	if r < minClientCertRenewBefore {
		return errors.Errorf("cannot compose InferenceGateway: spec.backendTLS.clientCertificate.renewBefore %s is under cert-manager's minimum of 5m", r)
	}
	if r >= d {
		return errors.Errorf("cannot compose InferenceGateway: spec.backendTLS.clientCertificate.renewBefore %s is not less than its duration %s; cert-manager would refuse the Certificate", r, d)
	}
	return nil
}
