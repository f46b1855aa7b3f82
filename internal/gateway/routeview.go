package gateway

import (
	"strings"

	"github.com/crossplane/function-sdk-go/errors"
)

// RouteView is what a ModelRoute uses of its InferenceGateway's spec: the
// whole contract between the two composers. Everything else in the spec is
// the gateway's own business.
type RouteView struct {
	// ProviderConfigName names the provider-kubernetes
	// ClusterProviderConfig that reaches the gateway's cluster, where the
	// ModelRoute composes too.
	ProviderConfigName string

	// TLS: the gateway terminates TLS, so routes attach to its https
	// listener (ListenerHTTPS) rather than its http one.
	TLS bool

	// ClientCertificate: the gateway has spec.backendTLS.clientCertificate,
	// so Envoy presents a client certificate to backends that ask for one.
	ClientCertificate bool
}

// ReadRouteView reads the fields of an InferenceGateway's spec that a
// ModelRoute uses, and only those. It does not apply the gateway's own rules
// (ReadSpec): a gateway whose spec breaks one of them, or a rule made
// stricter by a new version of the function, stops that gateway's reconcile,
// not every ModelRoute on it, whose RoutingReady follows GatewayReady anyway.
func ReadRouteView(xr map[string]any) (RouteView, error) {
	spec, _ := xr["spec"].(map[string]any)
	name, _ := spec["providerConfigName"].(string)
	if strings.TrimSpace(name) == "" {
		return RouteView{}, errors.New("cannot read the InferenceGateway: spec.providerConfigName is not set; set it to the provider-kubernetes ClusterProviderConfig that reaches the gateway's cluster")
	}
	v := RouteView{ProviderConfigName: name}
	// As InferenceGatewaySpec.TLSEnabled: an object, even an empty one, turns TLS on.
	switch tls := spec["tls"].(type) {
	case nil:
	case map[string]any:
		v.TLS = true
	default:
		return RouteView{}, errors.Errorf("cannot read the InferenceGateway: spec.tls is a %T, but must be an object; fix spec.tls", tls)
	}
	switch bt := spec["backendTLS"].(type) {
	case nil:
	case map[string]any:
		_, v.ClientCertificate = bt["clientCertificate"].(map[string]any)
	default:
		return RouteView{}, errors.Errorf("cannot read the InferenceGateway: spec.backendTLS is a %T, but must be an object; fix spec.backendTLS", bt)
	}
	return v, nil
}
