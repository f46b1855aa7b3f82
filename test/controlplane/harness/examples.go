package harness

import (
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The XRs under example/.
const (
	GatewayXRName = "inference-gateway"
	RouteName     = "qwen3-8b"
	TeamControlNS = "ml-team"    // the ModelRoute's namespace on the control plane
	APIKeySecret  = "openrouter" // the API-key Secret of the openrouter backend
	APIKeyField   = "api-key"    // its key holding the API key
	KeyedBackend  = "openrouter"

	// ResourceGatewayNamespace is the composition resource name of the
	// InferenceGateway's Object for the gateway namespace. Written out,
	// not taken from the function, like every name the suite checks.
	ResourceGatewayNamespace = "gateway-namespace"
)

var (
	// GVREGSecurityPolicy is Envoy Gateway's SecurityPolicies' resource.
	GVREGSecurityPolicy = schema.GroupVersionResource{Group: "gateway.envoyproxy.io", Version: "v1alpha1", Resource: "securitypolicies"}
	// GatewayXRFile is the example InferenceGateway, from the repository root.
	GatewayXRFile = filepath.Join("example", "gateway", "xr.yaml")
)
