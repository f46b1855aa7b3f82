package route

import (
	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
)

// Requirement names.
const (
	requireGateway      = "gateway"
	requireSecretPrefix = "secret-"
)

// requirements asks for the InferenceGateway by name, and for each API-key
// or cloud-credential Secret by name in the ModelRoute's own namespace.
func requirements(req compose.Request, spec *v1alpha1.ModelRouteSpec, apiVersion, ns string) map[string]compose.Requirement {
	gv := req.Input.InferenceGatewayAPIVersion
	if gv == "" {
		gv = apiVersion
	}
	out := map[string]compose.Requirement{
		requireGateway: {APIVersion: gv, Kind: gateway.Kind, Name: spec.GatewayName},
	}
	for _, be := range spec.Backends {
		if cs, ok := be.CredentialSecret(); ok {
			out[requireSecretPrefix+cs.Ref.Name] = compose.Requirement{APIVersion: "v1", Kind: "Secret", Name: cs.Ref.Name, Namespace: ns}
		}
	}
	caRequirements(spec, ns, out)
	return out
}
