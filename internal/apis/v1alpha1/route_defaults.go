package v1alpha1

import (
	"strings"

	aigv1b1 "github.com/envoyproxy/ai-gateway/api/v1beta1"
)

// The ModelRoute's spec read with its defaults: the API server fills in
// the schema's defaults, but crossplane render does not, so the function
// applies them again when a field is unset. Where a field has the name an
// accessor would take, the accessor is <Field>OrDefault.

// ModelName is the name callers send: spec.model, or <namespace>/<name>.
func (s *ModelRouteSpec) ModelName(ns, name string) string {
	if s.Model != "" {
		return s.Model
	}
	return ns + "/" + name
}

// RequestTimeout is spec.timeouts.request or its default.
func (s *ModelRouteSpec) RequestTimeout() string {
	if s.Timeouts != nil && s.Timeouts.Request != "" {
		return s.Timeouts.Request
	}
	return DefaultRequestTimeout
}

// ForwardsCaller reports whether the backend receives the caller's client
// ID: spec.backends[].forwardCallerIdentity, or by default only a backend
// inside the gateway cluster, one without an API key whose hostname is a
// Service's (<svc>.<ns>.svc or <svc>.<ns>.svc.<clusterDomain>). A backend
// with an API key is a third party's, who has no business knowing who
// inside the company called.
func (b Backend) ForwardsCaller(clusterDomain string) bool {
	if b.ForwardCallerIdentity != nil {
		return *b.ForwardCallerIdentity
	}
	h := b.Endpoint.Hostname
	return b.APIKey == nil && (strings.HasSuffix(h, ".svc") || strings.HasSuffix(h, ".svc."+clusterDomain))
}

// Port is the backend's endpoint.port or its default.
func (b Backend) Port() int32 {
	if b.Endpoint.Port == nil {
		return DefaultPort
	}
	return *b.Endpoint.Port
}

// TLS reports whether the backend is reached with TLS: endpoint.tls or its
// default.
func (b Backend) TLS() bool {
	if b.Endpoint.TLS == nil {
		return DefaultTLS
	}
	return *b.Endpoint.TLS
}

// KindOrDefault is the CARef's kind, defaulted.
func (r CARef) KindOrDefault() string {
	if r.Kind == "" {
		return DefaultCAKind
	}
	return r.Kind
}

// CARef is the backend's CA, or nil for the system CAs.
func (b Backend) CARef() *CARef {
	if !b.TLS() || b.Endpoint.TLSConfig == nil {
		return nil
	}
	return b.Endpoint.TLSConfig.CARef
}

// WantsClientCert reports whether the backend needs the gateway's client
// certificate.
func (b Backend) WantsClientCert() bool {
	return b.TLS() && b.Endpoint.TLSConfig != nil && b.Endpoint.TLSConfig.ClientCertificate
}

// PriorityOrDefault is the backend's priority, defaulted.
func (b Backend) PriorityOrDefault() int32 {
	if b.Priority == nil {
		return DefaultPriority
	}
	return *b.Priority
}

// WeightOrDefault is the backend's weight, defaulted.
func (b Backend) WeightOrDefault() int32 {
	if b.Weight == nil {
		return DefaultWeight
	}
	return *b.Weight
}

// Prefix is the backend's schema.prefix, or its schema's default.
func (b Backend) Prefix() *string {
	if b.Schema.Prefix != nil {
		return b.Schema.Prefix
	}
	switch aigv1b1.APISchema(b.Schema.Name) {
	case aigv1b1.APISchemaOpenAI, aigv1b1.APISchemaAnthropic:
		p := DefaultPrefix
		return &p
	default:
		// AI Gateway uses the prefix only for OpenAI and Anthropic (ai-gateway
		// v1.0.0 api/v1beta1/shared_types.go, VersionedAPISchema.Prefix).
		return nil
	}
}
