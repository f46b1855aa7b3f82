// Package gateway composes an InferenceGateway: the Envoy Gateway and
// EnvoyProxy, the backend-free anchor route that keeps AI Gateway's ext-proc
// sidecar injected, the failover policy, the front door (health check and
// HTTPS redirect), the TLS Secrets copied from the control plane, and an
// observe-only Object on the Envoy Deployment whose rollout decides
// GatewayReady. It composes nothing on a cluster another InferenceGateway
// already serves.
package gateway

import (
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/decode"
)

// HTTP/2 flow-control windows that let a 50Mi body (the default buffer
// limit, v1alpha1.DefaultBufferLimit) through without stalling on the
// defaults (64 KiB a stream, 1 MiB a connection).
var (
	http2StreamWindow     = resource.MustParse("16Mi")
	http2ConnectionWindow = resource.MustParse("24Mi")
)

// readSpec decodes and checks the spec of an observed InferenceGateway.
func readSpec(xr map[string]any) (*v1alpha1.InferenceGatewaySpec, error) {
	s := &v1alpha1.InferenceGatewaySpec{}
	if err := decode.Strict("InferenceGateway", "spec", xr["spec"], s, decode.CrossplaneSpecField); err != nil {
		return nil, err
	}
	err := s.Validate()
	return s, err
}

// implied names every composition resource the spec implies: Resources,
// and with TLS the redirect route and a copied Secret per certificateRef.
func implied(s *v1alpha1.InferenceGatewaySpec) map[string]bool {
	out := make(map[string]bool, len(Resources)+2)
	for _, n := range Resources {
		out[n] = true
	}
	if c := s.ClientCert(); c != nil {
		out[resourceClientCertificate] = true
		if c.CASecretRef != nil {
			out[resourceClientCASecret] = true
			out[resourceClientIssuer] = true
		}
	}
	if s.TLSEnabled() {
		out[ResourceRedirectRoute] = true
		for _, r := range s.TLS.CertificateRefs {
			out[ResourceTLSSecretPrefix+r.Name] = true
		}
	}
	return out
}
