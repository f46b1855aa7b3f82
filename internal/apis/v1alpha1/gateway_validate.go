package v1alpha1

import (
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crossplane/function-sdk-go/errors"
)

// Validate checks an InferenceGateway's spec: what the schema says, for
// crossplane render, which does not validate an XR against its XRD, and
// what the schema cannot say. Its first problem is the error, naming the
// field.
func (s *InferenceGatewaySpec) Validate() error {
	if strings.TrimSpace(s.ProviderConfigName) == "" {
		return errors.New("cannot compose InferenceGateway: spec.providerConfigName is required; set it to the provider-kubernetes ClusterProviderConfig that reaches the gateway's cluster")
	}
	// Immutable once set (the XRD's CEL rule), so a value no
	// ClusterProviderConfig can have would never be fixed in place.
	if errs := validation.IsDNS1123Subdomain(s.ProviderConfigName); len(errs) > 0 {
		return errors.Errorf("cannot compose InferenceGateway: spec.providerConfigName %q is not a ClusterProviderConfig name (%s); set the name of the provider-kubernetes ClusterProviderConfig that reaches the gateway's cluster, such as gpu-cluster-1", s.ProviderConfigName, strings.Join(errs, "; "))
	}
	if s.ClassName != "" {
		if errs := validation.IsDNS1123Subdomain(s.ClassName); len(errs) > 0 {
			return errors.Errorf("cannot compose InferenceGateway: spec.className %q is not a GatewayClass name (%s); name the GatewayClass of Envoy Gateway, such as envoy", s.ClassName, strings.Join(errs, "; "))
		}
	}
	if s.Replicas != nil && (*s.Replicas < 0 || *s.Replicas > MaxReplicas) {
		return errors.Errorf("cannot compose InferenceGateway: spec.replicas is %d; set it from 0 to %d", *s.Replicas, MaxReplicas)
	}
	if s.Hostname != "" {
		if errs := validation.IsDNS1123Subdomain(s.Hostname); len(errs) > 0 {
			return errors.Errorf("cannot compose InferenceGateway: spec.hostname %q is not a hostname (%s); set a DNS name such as llm.example.com", s.Hostname, strings.Join(errs, "; "))
		}
	}
	if err := s.ModelNames.validate(); err != nil {
		return errors.Wrap(err, "cannot compose InferenceGateway")
	}
	for _, check := range []func() error{s.validateConnection, s.validateFailover, s.validateEnvoy, s.validateAuth, s.validateBudgets, s.validateBackendTLS, s.validateTLS} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// gatewayDuration is Gateway API's Duration (gateway-api v1.5.1
// apis/v1/shared_types.go, Duration), which the EnvoyProxy's drainTimeout
// must match; Envoy Gateway then parses it with time.ParseDuration.
var gatewayDuration = regexp.MustCompile(`^([0-9]{1,5}(h|m|s|ms)){1,4}$`)

func (s *InferenceGatewaySpec) validateEnvoy() error {
	if s.Envoy == nil {
		return nil
	}
	if d := s.Envoy.DrainTimeout; d != nil {
		v, err := time.ParseDuration(*d)
		if !gatewayDuration.MatchString(*d) || err != nil || v < time.Second || v > MaxDrainTimeout {
			return errors.Errorf("cannot compose InferenceGateway: spec.envoy.drainTimeout %q is not a duration from 1s to 1h; set one such as the default %s", *d, DefaultDrainTimeout)
		}
	}
	if err := s.Envoy.validateServiceAccount(); err != nil {
		return err
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

func (s *InferenceGatewaySpec) validateConnection() error {
	if s.Connection == nil || s.Connection.BufferLimit == nil {
		return nil
	}
	q := s.Connection.BufferLimit
	// Envoy Gateway turns the limit into a uint32 and rejects the whole
	// ClientTrafficPolicy when it does not fit (gateway v1.8.3
	// internal/gatewayapi/clienttrafficpolicy.go, BufferLimit).
	v, ok := q.AsInt64()
	if !ok || v < MinBufferLimit || v > math.MaxUint32 {
		return errors.Errorf("cannot compose InferenceGateway: spec.connection.bufferLimit %s is out of range; set a size from 32Ki to 4095Mi, such as the default %s", q.String(), DefaultBufferLimit.String())
	}
	return nil
}

func (s *InferenceGatewaySpec) validateFailover() error {
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
	return validateRetryOn(f.RetryOn)
}

// validateTLS checks spec.tls.
func (s *InferenceGatewaySpec) validateTLS() error {
	if s.TLS == nil {
		return nil
	}
	if s.Hostname == "" {
		return errors.New("cannot compose InferenceGateway: spec.tls needs spec.hostname; set the hostname the certificate is for")
	}
	if len(s.TLS.CertificateRefs) == 0 {
		return errors.New("cannot compose InferenceGateway: spec.tls.certificateRefs is empty; name at least one TLS Secret in the gateway namespace")
	}
	if n := len(s.TLS.CertificateRefs); n > MaxCertificateRefs {
		return errors.Errorf("cannot compose InferenceGateway: spec.tls.certificateRefs has %d Secrets; name at most %d", n, MaxCertificateRefs)
	}
	seen := make(map[string]bool, len(s.TLS.CertificateRefs))
	for i, r := range s.TLS.CertificateRefs {
		if r.Name == "" {
			return errors.Errorf("cannot compose InferenceGateway: spec.tls.certificateRefs[%d].name is empty; name a TLS Secret", i)
		}
		if errs := validation.IsDNS1123Subdomain(r.Name); len(errs) > 0 {
			return errors.Errorf("cannot compose InferenceGateway: spec.tls.certificateRefs[%d].name %q is not a Secret name (%s); name a TLS Secret such as llm-tls", i, r.Name, strings.Join(errs, "; "))
		}
		// The list is a map keyed by name (+listType=map): the API
		// server refuses a name twice.
		if seen[r.Name] {
			return errors.Errorf("cannot compose InferenceGateway: spec.tls.certificateRefs[%d].name %q is listed twice; name each Secret once", i, r.Name)
		}
		seen[r.Name] = true
	}
	return nil
}

// validateRetryOn checks spec.failover.retryOn.
func validateRetryOn(r *RetryOn) error {
	if r == nil {
		return nil
	}
	// Both lists are sets (+listType=set): the API server refuses an item
	// twice, and so does render.
	for i, t := range r.Triggers {
		if !slices.Contains(RetryTriggers, egv1a1.TriggerEnum(t)) {
			return errors.Errorf("cannot compose InferenceGateway: spec.failover.retryOn.triggers[%d] %q is not a trigger Envoy Gateway knows; use one of %v", i, t, RetryTriggers)
		}
		if slices.Contains(r.Triggers[:i], t) {
			return errors.Errorf("cannot compose InferenceGateway: spec.failover.retryOn.triggers[%d] %q is listed twice; list each trigger once", i, t)
		}
	}
	if n := len(r.HTTPStatusCodes); n > MaxRetryStatusCodes {
		return errors.Errorf("cannot compose InferenceGateway: spec.failover.retryOn.httpStatusCodes has %d codes; list at most %d", n, MaxRetryStatusCodes)
	}
	for i, c := range r.HTTPStatusCodes {
		if slices.Contains(r.HTTPStatusCodes[:i], c) {
			return errors.Errorf("cannot compose InferenceGateway: spec.failover.retryOn.httpStatusCodes[%d] %d is listed twice; list each code once", i, c)
		}
		// Envoy Gateway's HTTPStatus (api/v1alpha1/shared_types.go).
		if c < 100 || c > 599 {
			return errors.Errorf("cannot compose InferenceGateway: spec.failover.retryOn.httpStatusCodes[%d] is %d; use an HTTP status from 100 to 599, such as 429 or 503", i, c)
		}
	}
	return nil
}

// validateServiceAccount checks the Envoy pods' ServiceAccount: a name
// Kubernetes takes, and annotations it and Gateway API take.
func (e *Envoy) validateServiceAccount() error {
	if n := e.ServiceAccountName; n != nil {
		if errs := validation.IsDNS1123Subdomain(*n); len(errs) > 0 {
			return errors.Errorf("cannot compose InferenceGateway: spec.envoy.serviceAccountName %q is not a ServiceAccount name: %s", *n, strings.Join(errs, "; "))
		}
	}
	if a := e.ServiceAccountAnnotations; len(a) > 0 {
		if len(a) > MaxServiceAccountAnnotations {
			return errors.Errorf("cannot compose InferenceGateway: spec.envoy.serviceAccountAnnotations has %d annotations; Gateway API allows at most %d on a Gateway's infrastructure", len(a), MaxServiceAccountAnnotations)
		}
		// What the API server checks of any object's annotations, and
		// Gateway API's limit on one value (gateway-api v1.5.1
		// apis/v1/shared_types.go, AnnotationValue).
		if errs := apivalidation.ValidateAnnotations(a, field.NewPath("spec", "envoy", "serviceAccountAnnotations")); len(errs) > 0 {
			return errors.Errorf("cannot compose InferenceGateway: %s", errs.ToAggregate())
		}
		for _, k := range slices.Sorted(maps.Keys(a)) {
			if len(a[k]) > 4096 {
				return errors.Errorf("cannot compose InferenceGateway: spec.envoy.serviceAccountAnnotations[%s] is %d characters; Gateway API allows at most 4096", k, len(a[k]))
			}
		}
	}
	return nil
}
