// Package names holds the fixed names this function composes, Envoy Gateway's
// naming rules for the resources it generates, and helpers that fit derived
// names into Kubernetes' length limits.
package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Defaults for the names on the gateway cluster. Each can be changed through
// the function's Input; these are what Modelplane uses.
const (
	// DefaultGatewayNamespace is the namespace on the gateway cluster that
	// holds the Gateway, its EnvoyProxy and the anchor route.
	DefaultGatewayNamespace = "modelplane-system"

	// DefaultGatewayName names the Gateway and its EnvoyProxy.
	DefaultGatewayName = "inference-gateway"

	// DefaultObjectNamespace is the control-plane namespace that holds the
	// provider-kubernetes Objects of a cluster-scoped InferenceGateway.
	DefaultObjectNamespace = "modelplane-system"

	// DefaultGatewayClassName is the GatewayClass the Gateway uses when the
	// InferenceGateway names none.
	DefaultGatewayClassName = "envoy"

	// DefaultEnvoyGatewayNamespace is where Envoy Gateway runs, and so where
	// it puts the Envoy Deployment in its default ControllerNamespace mode
	// (envoyproxy/gateway v1.8.3 internal/infrastructure/kubernetes/proxy_infra.go,
	// GetResourceNamespace).
	DefaultEnvoyGatewayNamespace = "envoy-gateway-system"

	// DefaultAnchorHeaderName is the header the anchor route matches. It must
	// never be x-ai-eg-model, or AI Gateway lists the anchor in /v1/models
	// (envoyproxy/ai-gateway v1.0.0 internal/controller/gateway.go).
	DefaultAnchorHeaderName = "x-modelplane-gateway-anchor"

	// DefaultClusterDomain is Kubernetes' default DNS domain of Services.
	DefaultClusterDomain = "cluster.local"
	// DefaultAnchorHeaderValue is the value the anchor route matches.
	DefaultAnchorHeaderValue = "true"
)

// Fixed names and keys that are not configurable.
const (
	// ModelHeader is the header AI Gateway routes on and lists as models in
	// /v1/models when it is matched Exact (ai-gateway v1.0.0
	// internal/controller/gateway.go, the models list).
	ModelHeader = "x-ai-eg-model"

	// CallerHeader carries the caller's client ID once caller
	// authentication has accepted its key (Envoy Gateway's apiKeyAuth
	// forwardClientIDHeader), to the backends that may see it; the access
	// log records it (Modelplane's name).
	CallerHeader = "x-modelplane-caller"

	// InputTokensKey, OutputTokensKey and TotalTokensKey are the keys
	// under which AI Gateway writes a response's token counts into its
	// dynamic metadata (namespace io.envoy.ai_gateway): each ModelRoute's
	// AIGatewayRoute names them in llmRequestCosts (ai-gateway v1.0.0
	// internal/extproc/processor_impl.go, buildDynamicMetadata). The
	// access log and the token budgets read them (Modelplane's names).
	InputTokensKey  = "llm_input_token"
	OutputTokensKey = "llm_output_token"
	TotalTokensKey  = "llm_total_token"

	// TeamNamespaceLabel is the label key a team namespace carries, and the
	// key the Gateway's listeners admit routes by.
	TeamNamespaceLabel = "modelplane.ai/namespace"

	// anchorRouteSuffix names the anchor AIGatewayRoute: <gateway>-anchor.
	anchorRouteSuffix = "anchor"

	// failoverPolicySuffix names the BackendTrafficPolicy: <gateway>-failover.
	failoverPolicySuffix = "failover"

	// KeyVersionAnnotation is set on an API-key Secret on the gateway
	// cluster to the resourceVersion of the control-plane Secret it is
	// copied from.
	KeyVersionAnnotation = "modelplane.ai/api-key-version"

	// clientPolicySuffix names the ClientTrafficPolicy: <gateway>-client.
	clientPolicySuffix = "client"
	// gatewayStatusSuffix names the ConfigMap that carries GatewayReady to
	// the ModelRoutes: <gateway>-status.
	gatewayStatusSuffix = "status"
	// callerPolicySuffix names the caller-auth SecurityPolicy,
	// <gateway>-callers, and starts the names of the caller Secrets copied
	// to the gateway cluster, <gateway>-callers-<Secret>.
	callerPolicySuffix = "callers"
	// CallerSecretVersionAnnotation is set on a caller Secret on the
	// gateway cluster to the resourceVersion of the control-plane Secret
	// it is copied from.
	CallerSecretVersionAnnotation = "modelplane.ai/callers-version"

	// FrontDoorLabel marks the front-door namespace on the gateway
	// cluster, which holds the gateway's own routes (health check and
	// HTTPS redirect); its value is the Gateway's name. With TLS the plain
	// HTTP listener admits only namespaces with this label.
	FrontDoorLabel = "modelplane.ai/front-door"

	// FrontDoorSuffix names the front-door namespace, <gateway
	// namespace>-front-door, and its SecurityPolicy, <gateway>-front-door.
	FrontDoorSuffix = "front-door"

	// HealthSuffix names the health check's HTTPRoute and HTTPRouteFilter:
	// <gateway>-healthz.
	HealthSuffix = "healthz"

	// RedirectSuffix names the HTTPS redirect's HTTPRoute:
	// <gateway>-https-redirect.
	RedirectSuffix = "https-redirect"

	// accessPolicySuffix names a ModelRoute's access SecurityPolicy:
	// <route>-access.
	accessPolicySuffix = "access"

	// HealthPath is the path the health check answers on.
	HealthPath = "/healthz"

	// SecretVersionAnnotation is set on a TLS Secret on the gateway
	// cluster to the resourceVersion of the control-plane Secret it is
	// copied from.
	SecretVersionAnnotation = "modelplane.ai/secret-version"

	// teamNamespacePrefix starts every team namespace on the gateway cluster.
	teamNamespacePrefix = "mp"

	// envoyPrefix is what Envoy Gateway puts before every resource it
	// generates for a Gateway (envoyproxy/gateway v1.8.3
	// internal/envoygateway/config/config.go, EnvoyPrefix).
	envoyPrefix = "envoy"

	// maxName is the longest DNS-1123 label, which is what namespaces and
	// most object names must fit in.
	maxName = 63

	// shortHash is how many hex characters of a hash a derived name carries.
	shortHash = 5
)

// EnvoyDeployment is the name this function pins on the Envoy Deployment
// through EnvoyProxy spec.provider.kubernetes.envoyDeployment.name. It is
// Envoy Gateway's own default name without the hash suffix, so the "envoy-"
// prefix is the one Envoy Gateway uses. Envoy Gateway uses a pinned name
// verbatim (v1.8.3 internal/infrastructure/kubernetes/proxy/resource_provider.go).
func EnvoyDeployment(gatewayNamespace, gatewayName string) string {
	return envoyPrefix + "-" + gatewayNamespace + "-" + gatewayName
}

// FilterConfigSecret is the name of AI Gateway's filter-config Secret for
// a Gateway, in the namespace of the Envoy pods (ai-gateway v1.0.0
// internal/controller/ai_gateway_route.go, FilterConfigSecretPerGatewayName;
// gateway_mutator.go reads it in the pod's namespace).
func FilterConfigSecret(gatewayNamespace, gatewayName string) string {
	return gatewayName + "-" + gatewayNamespace
}

// AnchorRoute is the name of the backend-free anchor AIGatewayRoute.
func AnchorRoute(gatewayName string) string {
	return Child(gatewayName, anchorRouteSuffix)
}

// FailoverPolicy is the name of the gateway's BackendTrafficPolicy.
func FailoverPolicy(gatewayName string) string {
	return Child(gatewayName, failoverPolicySuffix)
}

// ClientPolicy is the name of the gateway's ClientTrafficPolicy.
func ClientPolicy(gatewayName string) string {
	return Child(gatewayName, clientPolicySuffix)
}

// FrontDoorNamespace is the namespace on the gateway cluster that holds the
// gateway's own routes. It is not the gateway namespace, which no listener
// admits, so that the anchor route there is never served.
func FrontDoorNamespace(gatewayNamespace string) string {
	return Child(gatewayNamespace, FrontDoorSuffix)
}

// GatewayStatus is the name of the ConfigMap that carries GatewayReady,
// in the gateway namespace.
func GatewayStatus(gatewayName string) string {
	return Child(gatewayName, gatewayStatusSuffix)
}

// CallerPolicy is the name of the gateway's caller-auth SecurityPolicy.
func CallerPolicy(gatewayName string) string {
	return Child(gatewayName, callerPolicySuffix)
}

// CallerSecret is the name on the gateway cluster of the caller Secret
// copied from the control-plane Secret secret.
func CallerSecret(gatewayName, secret string) string {
	return Child(CallerPolicy(gatewayName), secret)
}

// AccessPolicy is the name of the SecurityPolicy that restricts the
// ModelRoute route to its spec.access callers, in its team namespace.
// The only SecurityPolicies there are the routes' own, and no two routes'
// names meet: <route>-access is one route's alone, and a name past 63
// characters ends in Child's hash, never in "-access" (whose "s" is no
// hex digit).
func AccessPolicy(route string) string {
	return Child(route, accessPolicySuffix)
}

// TeamNamespace is the namespace on the gateway cluster that holds the
// routes of the control-plane namespace ns: mp-<ns>-<hash>. The hash keeps
// two control-plane namespaces that share a long prefix apart once the name
// is cut to 63 characters, and makes the name deterministic.
func TeamNamespace(ns string) string {
	return hashed(teamNamespacePrefix+"-"+ns, ns)
}

// Child joins parent and child with "-". When the result is longer than 63
// characters it is cut and given a short hash of the full name, so that it
// stays unique and deterministic.
func Child(parent, child string) string {
	n := parent + "-" + child
	if len(n) <= maxName {
		return n
	}
	return hashed(n, n)
}

// hashed returns base-<hash of key>, with base cut so the whole fits in 63
// characters and never ends in "-".
func hashed(base, key string) string {
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:])[:shortHash]
	if room := maxName - len(h) - 1; len(base) > room {
		base = base[:room]
	}
	return strings.TrimRight(base, "-.") + "-" + h
}
