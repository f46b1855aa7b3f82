package harness

// ToolRateLimit is the global rate-limit service, at the pseudo-version
// Envoy Gateway v1.8.3 pins (its go.mod), whose image its infrastructure
// runs as the envoy-ratelimit Deployment.
var ToolRateLimit = Tool{Name: "ratelimit", Version: "v1.4.1-0.20260122083618-3fb702589d36", module: "ratelimit",
	pkg: "github.com/envoyproxy/ratelimit/src/service_cmd"}

// RateLimitXDSPort is Envoy Gateway's xDS server for the rate-limit
// service, started only when its configuration enables rate limiting
// (gateway v1.8.3 internal/cmd/server.go; the port:
// internal/infrastructure/kubernetes/ratelimit/resource.go,
// XdsGrpcSotwConfigServerPort).
const RateLimitXDSPort = 18001
