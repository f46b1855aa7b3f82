// Package route composes a ModelRoute: the model's AIGatewayRoute, with its
// backends in priority (fallback) tiers and weights, and each backend's
// Envoy Gateway Backend, AIServiceBackend and credentials, all on the
// gateway's cluster.
package route

import (
	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/decode"
)

// Kind is the composite kind this package composes.
const Kind = v1alpha1.KindModelRoute

// readSpec decodes and checks a ModelRoute's spec. Every problem is an error
// that names the field; the caller makes it Fatal, which leaves everything
// composed in place.
func readSpec(xr map[string]any) (*v1alpha1.ModelRouteSpec, error) {
	s := &v1alpha1.ModelRouteSpec{}
	if err := decode.Strict("ModelRoute", "spec", xr["spec"], s, decode.CrossplaneSpecField); err != nil {
		return nil, err
	}
	err := s.Validate()
	return s, err
}
