package route

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
)

// backends is what the function knows of each backend's API key.
type backends struct {
	// usable backends go into the route.
	usable []v1alpha1.Backend
	// delivering names backends whose key exists on the control plane but
	// has not reached the gateway cluster yet.
	delivering []string
	// placing names backends not in the route yet whose
	// Backend or AIServiceBackend is not on the gateway cluster yet.
	placing []string
	// caDelivering names backends not in the route yet whose CA exists on
	// the control plane but has not reached the gateway cluster yet.
	caDelivering []string
	// credentials of the backends with an API key, by backend name.
	credentials map[string]keyState
	// cas of the backends with their own CA, by backend name.
	cas map[string]caState
	// viaLegacy names the backends the route keeps naming by their name
	// before they were renamed, while their objects are on their way to
	// the new one (names.go).
	viaLegacy map[string]string
	warnings  []string
}

// keyState is the state of one backend's API-key Secret.
type keyState struct {
	// withKey: the credential Object may carry the reference that copies
	// the key (see builder.credential).
	withKey bool
	// delivered: the provider applied the credential with its key.
	delivered bool
	// version is the resourceVersion of the API-key Secret on the control
	// plane.
	version string
}

// readBackends sorts the backends by the state of their API keys and of
// their objects on the gateway cluster. A backend with a key joins the
// route once its key has reached the gateway cluster, so AI Gateway never
// serves it with an empty Secret; a backend already in the observed route
// stays while its key exists on the control plane, so a provider hiccup
// never drops it.
//
// A backend new to a route that exists on the gateway cluster joins it
// only once its Backend and AIServiceBackend exist there too (placed).
// Crossplane hands the route and the new backend's objects to
// provider-kubernetes at once, and the provider applies them in any order.
// Should the route reach the cluster first, AI Gateway copies the new
// backendRef into its HTTPRoute (ai-gateway v1.0.0
// internal/controller/ai_gateway_route.go, newHTTPRoute) and Envoy Gateway
// finds no Backend for it: an invalid destination setting (envoyproxy/
// gateway v1.8.3 internal/gatewayapi/route.go, processHTTPRouteRules), which
// makes the rule need a cluster per setting (internal/ir/xds.go,
// HTTPRoute.NeedsClusterPerSetting). Envoy Gateway then routes the model
// by weighted_clusters, one cluster per backend plus a 500 share
// (internal/xds/translator/route.go, buildXdsWeightedRouteAction), whose
// names AI Gateway does not recognise (internal/extensionserver/
// post_translate_modify.go, maybeModifyCluster expects
// httproute/<ns>/<name>/rule/<i>): no priorities and no upstream ext-proc,
// so the serving model's fallback tier takes live traffic without its API
// key.
//
// A brand-new route waits the same way: its AIGatewayRoute is composed once
// at least one backend is placed, and names only placed backends. AI
// Gateway v1.0.0 cannot build the HTTPRoute of an AIGatewayRoute that names
// an AIServiceBackend it cannot find: the reconcile fails, writes
// NotAccepted, and is retried with controller-runtime's exponential
// back-off (internal/controller/ai_gateway_route.go, newHTTPRoute;
// sigs.k8s.io/controller-runtime's default rate limiter, up to 1000 s).
// The AIServiceBackend's own reconcile, once it exists, requeues the
// routes that name it (internal/controller/ai_service_backend.go,
// Reconcile), but every failed attempt before that is one more turn of
// AI Gateway's single route worker (internal/controller/controller.go,
// TypedControllerBuilderForCRD sets no MaxConcurrentReconciles, so
// controller-runtime runs one), which a hundred new routes keep busy.
//
// A backend's TLS is judged first, the same way: one that requires the
// gateway's client certificate from a gateway without one, or whose CA is
// missing, is left out with a Warning; one whose CA has not reached the
// gateway cluster joins the route once it has.
func readBackends(req compose.Request, spec *v1alpha1.ModelRouteSpec, route string, inRoute map[string]bool, gwName string, gw *gateway.RouteView) backends {
	bs := backends{credentials: map[string]keyState{}, cas: map[string]caState{}, viaLegacy: map[string]string{}}
	for _, be := range spec.Backends {
		p := place(route, be.Name)
		joined := p.joined(inRoute)
		placed := func() bool { return isPlaced(req.Observed, inRoute, p) }
		usable, caWaiting := bs.judgeTLS(req, be, p, joined, gwName, gw)
		if !usable {
			continue
		}
		if p.moving(inRoute) && !bs.moved(req.Observed, be, p) {
			bs.viaLegacy[be.Name] = p.legacy
		}
		if _, ok := be.CredentialSecret(); !ok {
			switch {
			case caWaiting:
				bs.caDelivering = append(bs.caDelivering, be.Name)
			case placed():
				bs.usable = append(bs.usable, be)
			default:
				bs.placing = append(bs.placing, be.Name)
			}
			continue
		}
		present, version, problem := apiKey(req, be)
		cs := remote.CopyStateIn(req.Observed, prefixCredential+p.key)
		c := keyState{withKey: cs.MayReference, delivered: cs.Delivered, version: version}
		bs.credentials[be.Name] = c
		switch {
		case problem != "":
			bs.warnings = append(bs.warnings, problem)
		case !present:
			// Not fetched yet: Crossplane calls again with the Secret.
		case joined:
			bs.usable = append(bs.usable, be)
		case caWaiting:
			bs.caDelivering = append(bs.caDelivering, be.Name)
		case c.delivered && placed():
			bs.usable = append(bs.usable, be)
		case c.delivered:
			bs.placing = append(bs.placing, be.Name)
		default:
			bs.delivering = append(bs.delivering, be.Name)
		}
	}
	return bs
}

// judge adds to p why backends are not in the route: none usable, keys
// or CAs on their way, or objects not on the gateway cluster yet. total is
// the number of backends in the spec.
func (bs backends) judge(p *compose.Problems, total int) {
	switch {
	case len(bs.usable) == 0 && len(bs.delivering) == 0 && len(bs.caDelivering) == 0 && len(bs.placing) == 0:
		p.Add(ReasonNoUsableBackends, fmt.Sprintf("none of the %d backends can be used: every one lacks its API key, its CA, or the gateway's client certificate it requires", total))
	case len(bs.delivering) > 0:
		p.Add(ReasonWaitingForCredentials, fmt.Sprintf("the API keys of backends %s have not reached the gateway cluster yet; provider-kubernetes copies them from the control plane", strings.Join(bs.delivering, ", ")))
	case len(bs.caDelivering) > 0:
		p.Add(ReasonWaitingForCredentials, fmt.Sprintf("the CA certificates of backends %s have not reached the gateway cluster yet; they join the route once they have", strings.Join(bs.caDelivering, ", ")))
	}
	if len(bs.placing) > 0 {
		p.Add(ReasonWaitingForBackends, fmt.Sprintf("backends %s join the route once their Backend and AIServiceBackend exist on the gateway cluster; until then the route serves the others. Lasting, the backend-<name> and aibackend-<name> Objects' Synced message", strings.Join(bs.placing, ", ")))
	}
}

// isPlaced reports whether a backend is in the observed route, or its
// Backend and AIServiceBackend are live on the gateway cluster.
func isPlaced(obs map[string]remote.Observed, inRoute map[string]bool, p placement) bool {
	if p.joined(inRoute) {
		return true
	}
	return newlyPlaced(obs, p)
}

// newlyPlaced reports whether the backend's Backend and AIServiceBackend,
// under its keys, are live on the gateway cluster.
func newlyPlaced(obs map[string]remote.Observed, p placement) bool {
	for _, n := range []string{prefixBackend + p.key, prefixAIBackend + p.key} {
		if o, ok := obs[n]; !ok || !o.Live() {
			return false
		}
	}
	return true
}

// moved reports whether a renamed backend's objects are all on the
// gateway cluster under its new name, so that the route may name it so:
// its Backend and AIServiceBackend, and with an API key its copy, with the
// key, and its BackendSecurityPolicy (without which AI Gateway would send
// the backend requests without the key), and with its own CA the CA's
// copy, which its Backend names.
func (bs *backends) moved(obs map[string]remote.Observed, be v1alpha1.Backend, p placement) bool {
	if !newlyPlaced(obs, p) {
		return false
	}
	if _, ok := be.CredentialSecret(); ok && !remote.CopyStateIn(obs, prefixCredential+p.key).Delivered {
		return false
	}
	if o, ok := obs[prefixCredPolicy+p.key]; be.Authenticated() && (!ok || !o.Live()) {
		return false
	}
	return be.CARef() == nil || bs.cas[be.Name].delivered
}

// observedBackendRefs names the backendRefs of the observed route: those
// Crossplane last applied (the Object's spec) and those the gateway
// cluster has (its live manifest), which differ until the provider has
// applied the change; and those of the live HTTPRoute AI Gateway generated
// from it, which names the same Backends (ai-gateway v1.0.0
// internal/controller/ai_gateway_route.go, newHTTPRoute, copies each
// AIServiceBackend's backendRef) and follows the route only once AI
// Gateway has reconciled it. While AI Gateway is slow or down, the
// HTTPRoute Envoy Gateway translates still names a removed backend's
// Backend; deleting it then would make the destination invalid and the
// rule a weighted split (readBackends says what that costs).
func observedBackendRefs(req compose.Request) map[string]bool {
	out := map[string]bool{}
	var ms []map[string]any
	if o, ok := req.Observed[ResourceRoute]; ok {
		ms = append(ms, o.Applied(), o.Manifest())
	}
	if o, ok := req.Observed[ResourceHTTPRoute]; ok && o.Live() {
		ms = append(ms, o.Manifest())
	}
	for _, m := range ms {
		rules, _, _ := unstructured.NestedSlice(m, "spec", "rules")
		for _, r := range rules {
			rm, _ := r.(map[string]any)
			refs, _, _ := unstructured.NestedSlice(rm, "backendRefs")
			for _, x := range refs {
				xm, _ := x.(map[string]any)
				if n, _ := xm["name"].(string); n != "" {
					out[n] = true
				}
			}
		}
	}
	return out
}

// apiKey reports whether a backend's API key is there and the Secret's
// resourceVersion, or a problem that names the backend and the Secret. It
// never reads the value: the provider copies it. All are empty while
// Crossplane has not fetched the Secret yet: that is no problem of the
// user's, and Crossplane calls the function again with it.
func apiKey(req compose.Request, be v1alpha1.Backend) (bool, string, string) {
	cs, _ := be.CredentialSecret()
	ref, noun, field := cs.Ref, cs.Noun, cs.Field
	items, resolved := req.Required[requireSecretPrefix+ref.Name]
	switch {
	case !resolved:
		return false, "", ""
	case len(items) == 0:
		return false, "", fmt.Sprintf("backend %q is left out of the route: its %s Secret %q does not exist in the ModelRoute's namespace; create it with the key %q", be.Name, noun, ref.Name, ref.Key)
	}
	md, _ := items[0]["metadata"].(map[string]any)
	version, _ := md["resourceVersion"].(string)
	data, _ := items[0]["data"].(map[string]any)
	if v, _ := data[ref.Key].(string); v == "" {
		return false, version, fmt.Sprintf("backend %q is left out of the route: its %s Secret %q has no key %q; add the key or fix spec.backends.%s.key", be.Name, noun, ref.Name, ref.Key, field)
	}
	return true, version, ""
}
