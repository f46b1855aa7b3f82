package gateway

import (
	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
	"github.com/modelplaneai/function-inference-gateway/internal/upstream"
)

// healthBody is what GET /healthz answers, from Envoy itself.
const healthBody = `{"status":"ok"}`

// The front door is what the gateway serves on its own: GET /healthz, and
// with TLS a 308 to https for everything else on port 80. Its routes live in
// the front-door namespace, not the gateway namespace: the anchor route
// there must stay unserved, and Envoy Gateway serves a route only where a
// listener's allowedRoutes admits its namespace.

// listenerAdmission says which namespaces each listener admits routes
// from. Label selectors AND their requirements, so:
//   - without TLS, the http listener admits every namespace with the
//     TeamNamespaceLabel: the team namespaces and the front door, which
//     carries the key too;
//   - with TLS, the http listener admits only the front door (health check
//     and redirect), and the https listener every namespace with the
//     TeamNamespaceLabel: the team namespaces and the front door, whose
//     health route a load balancer probes on 443 too. Each front-door route
//     names its listeners by sectionName, so the redirect stays on http.
//
// The gateway namespace carries neither label, so no listener admits it
// and the anchor's header match is never served.
func (b builder) listenerAdmission() (http, https *gwapiv1.AllowedRoutes) {
	admit := func(reqs ...metav1.LabelSelectorRequirement) *gwapiv1.AllowedRoutes {
		return &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{
			From:     ptr.To(gwapiv1.NamespacesFromSelector),
			Selector: &metav1.LabelSelector{MatchExpressions: reqs},
		}}
	}
	team := metav1.LabelSelectorRequirement{Key: names.TeamNamespaceLabel, Operator: metav1.LabelSelectorOpExists}
	if !b.spec.TLSEnabled() {
		return admit(team), nil
	}
	frontDoor := metav1.LabelSelectorRequirement{Key: names.FrontDoorLabel, Operator: metav1.LabelSelectorOpExists}
	return admit(frontDoor), admit(team)
}

// frontDoorMeta places an object in the front-door namespace.
func (b builder) frontDoorMeta(name string) remote.Meta {
	return remote.Meta{Name: name, Namespace: names.FrontDoorNamespace(b.in.GatewayNamespace)}
}

// frontDoorNamespace holds the gateway's own routes. It carries the
// FrontDoorLabel and, with an empty value because no team owns it, the
// TeamNamespaceLabel, so that the http listener admits it with or without
// TLS (listenerAdmission). Like the gateway namespace it is created and
// never deleted.
func (b builder) frontDoorNamespace() *remote.Object {
	return b.wrap(&remote.Manifest[struct{}]{
		APIVersion: "v1",
		Kind:       "Namespace",
		Metadata: remote.Meta{
			Name:   names.FrontDoorNamespace(b.in.GatewayNamespace),
			Labels: map[string]string{names.FrontDoorLabel: b.in.GatewayName, names.TeamNamespaceLabel: ""},
		},
	}, remote.NeverDelete())
}

// healthFilter is Envoy Gateway's direct response: 200 with a small JSON
// body, answered by Envoy without a backend (gateway v1.8.3
// api/v1alpha1/httproutefilter_types.go, HTTPDirectResponseFilter).
func (b builder) healthFilter() *remote.Object {
	return b.wrap(&remote.Manifest[egv1a1.HTTPRouteFilterSpec]{
		APIVersion: upstream.EnvoyGatewayAPIVersion,
		Kind:       "HTTPRouteFilter",
		Metadata:   b.frontDoorMeta(names.Child(b.in.GatewayName, names.HealthSuffix)),
		Spec: &egv1a1.HTTPRouteFilterSpec{DirectResponse: &egv1a1.HTTPDirectResponseFilter{
			ContentType: new("application/json"),
			Body:        &egv1a1.CustomResponseBody{Type: ptr.To(egv1a1.ResponseValueTypeInline), Inline: new(healthBody)},
			StatusCode:  new(200),
		}},
	})
}

// healthRoute answers GET /healthz on the plain HTTP listener through the
// direct-response filter. The rule has no backendRefs: Envoy Gateway
// serves a rule's direct response or redirect instead of its 500 for a
// rule without valid backends (gateway v1.8.3 internal/gatewayapi/route.go,
// processHTTPRouteRules: a route that already has a direct response or a
// redirect from a filter keeps it). An Exact path match takes precedence
// over every prefix match on the listener, the model routes' and the
// redirect's included (gateway-api v1.5.1 apis/v1/httproute_types.go,
// HTTPRouteRule.Matches).
func (b builder) healthRoute() *remote.Object {
	listeners := []string{ListenerHTTP}
	if b.spec.TLSEnabled() {
		listeners = append(listeners, ListenerHTTPS)
	}
	// Any method: some load balancers probe with HEAD.
	return b.frontDoorRoute(names.HealthSuffix, listeners,
		gwapiv1.HTTPRouteMatch{Path: &gwapiv1.HTTPPathMatch{Type: ptr.To(gwapiv1.PathMatchExact), Value: new(names.HealthPath)}},
		gwapiv1.HTTPRouteFilter{
			Type: gwapiv1.HTTPRouteFilterExtensionRef,
			ExtensionRef: &gwapiv1.LocalObjectReference{
				Group: upstream.EnvoyGatewayGroup, Kind: "HTTPRouteFilter", Name: gwapiv1.ObjectName(names.Child(b.in.GatewayName, names.HealthSuffix)),
			},
		})
}

// redirectRoute sends every other request on port 80 to https on the
// gateway's hostname with a 308, so no client sends a key in clear text
// twice. A 308 keeps the method and body (RFC 9110 15.4.9); after a 301
// most clients turn a POST into a GET without its body, and a model call
// is a POST. Gateway API allows 308 as an extended code
// (gateway-api v1.5.1 apis/v1/httproute_types.go,
// HTTPRequestRedirectFilter.StatusCode), Envoy Gateway accepts it
// (gateway v1.8.3 internal/utils/http/http.go, SupportedRedirectCodes)
// and tells Envoy PERMANENT_REDIRECT (internal/xds/translator/route.go).
// Without a port, a redirect to https goes to 443
// (HTTPRequestRedirectFilter.Port).
func (b builder) redirectRoute() *remote.Object {
	return b.frontDoorRoute(names.RedirectSuffix, []string{ListenerHTTP},
		gwapiv1.HTTPRouteMatch{Path: &gwapiv1.HTTPPathMatch{Type: ptr.To(gwapiv1.PathMatchPathPrefix), Value: new("/")}},
		gwapiv1.HTTPRouteFilter{
			Type: gwapiv1.HTTPRouteFilterRequestRedirect,
			RequestRedirect: &gwapiv1.HTTPRequestRedirectFilter{
				Scheme:     new("https"),
				Hostname:   new(gwapiv1.PreciseHostname(b.spec.Hostname)),
				StatusCode: new(308),
			},
		})
}

// frontDoorRoute is an HTTPRoute <gateway>-<suffix> in the front door, on
// the named listeners, with one rule of one match and one filter and no
// backendRefs.
func (b builder) frontDoorRoute(suffix string, listeners []string, match gwapiv1.HTTPRouteMatch, filter gwapiv1.HTTPRouteFilter) *remote.Object {
	parents := make([]gwapiv1.ParentReference, len(listeners))
	for i, l := range listeners {
		parents[i] = ParentRef(b.in, l)
	}
	return b.wrap(&remote.Manifest[gwapiv1.HTTPRouteSpec]{
		APIVersion: upstream.GatewayAPIVersion,
		Kind:       "HTTPRoute",
		Metadata:   b.frontDoorMeta(names.Child(b.in.GatewayName, suffix)),
		Spec: &gwapiv1.HTTPRouteSpec{
			CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: parents},
			Rules:           []gwapiv1.HTTPRouteRule{{Matches: []gwapiv1.HTTPRouteMatch{match}, Filters: []gwapiv1.HTTPRouteFilter{filter}}},
		},
	})
}

// frontDoorPolicy lets every caller through to the front door's routes,
// whatever SecurityPolicy targets the Gateway (caller authentication). A
// SecurityPolicy that targets a route wins over one that targets its
// Gateway: Envoy Gateway translates route-targeted policies first and a
// Gateway-targeted one skips every route whose security is already set
// (gateway v1.8.3 internal/gatewayapi/securitypolicy.go,
// ProcessSecurityPolicies and translateSecurityPolicyForGateway), and
// without mergeType nothing of the Gateway's is merged in
// (api/v1alpha1/securitypolicy_types.go, SecurityPolicySpec.MergeType).
// authorization.defaultAction Allow with no rules allows every request
// (buildAuthorization); an authorization with neither would deny all.
func (b builder) frontDoorPolicy() *remote.Object {
	targets := []gwapiv1.LocalPolicyTargetReferenceWithSectionName{b.routeTarget(names.HealthSuffix)}
	if b.spec.TLSEnabled() {
		targets = append(targets, b.routeTarget(names.RedirectSuffix))
	}
	return b.wrap(&remote.Manifest[egv1a1.SecurityPolicySpec]{
		APIVersion: upstream.EnvoyGatewayAPIVersion,
		Kind:       "SecurityPolicy",
		Metadata:   b.frontDoorMeta(names.Child(b.in.GatewayName, names.FrontDoorSuffix)),
		Spec: &egv1a1.SecurityPolicySpec{
			PolicyTargetReferences: egv1a1.PolicyTargetReferences{TargetRefs: targets},
			Authorization:          &egv1a1.Authorization{DefaultAction: ptr.To(egv1a1.AuthorizationActionAllow)},
		},
	})
}

// routeTarget is a policy target: one of the front door's HTTPRoutes.
func (b builder) routeTarget(suffix string) gwapiv1.LocalPolicyTargetReferenceWithSectionName {
	return gwapiv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gwapiv1.LocalPolicyTargetReference{
		Group: upstream.GatewayAPIGroup, Kind: "HTTPRoute", Name: gwapiv1.ObjectName(names.Child(b.in.GatewayName, suffix)),
	}}
}
