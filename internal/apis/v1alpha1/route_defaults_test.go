package v1alpha1_test

import "github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"

// routeDefaults are the ModelRoute XRD's defaults (TestDefaultsMatchSchema).
var routeDefaults = map[string]any{
	"spec.backends[].priority":                      v1alpha1.DefaultPriority,
	"spec.backends[].weight":                        v1alpha1.DefaultWeight,
	"spec.backends[].endpoint.port":                 v1alpha1.DefaultPort,
	"spec.backends[].endpoint.tls":                  v1alpha1.DefaultTLS,
	"spec.backends[].endpoint.tlsConfig.caRef.kind": v1alpha1.DefaultCAKind,
	"spec.timeouts.request":                         v1alpha1.DefaultRequestTimeout,
}
