package route

import (
	"slices"

	"github.com/crossplane/function-sdk-go/errors"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
)

// Composer composes ModelRoutes.
type Composer struct{}

// Compose builds everything a ModelRoute needs on the gateway's cluster. It
// always composes what it can: it gates only RoutingReady on the gateway,
// never the composed resources, because Crossplane deletes whatever a
// function stops desiring, and that would take the model offline.
func (r Composer) Compose(req compose.Request) (*compose.Result, error) {
	spec, err := readSpec(req.Composite)
	if err != nil {
		// A route that composed keeps serving what it composed, and says
		// why its spec is refused; a new one is answered Fatal, as there
		// is nothing to keep (compose.Refuse).
		if res, ok := compose.Refuse(req, ConditionType, err); ok {
			return res, nil
		}
		return nil, err
	}
	name, ns, err := compositeName(req.Composite)
	if err != nil {
		return nil, err
	}
	apiVersion, _ := req.Composite["apiVersion"].(string)
	if spec.GatewaySelector != nil {
		return r.composeFleet(req, spec, name, ns, apiVersion)
	}
	inRoute := observedBackendRefs(req)
	res := &compose.Result{
		Resources:    map[string]compose.Desired{},
		Implied:      implied(spec, req.Input, inRoute, name, req.Observed),
		Requirements: requirements(req, spec, apiVersion, ns),
	}
	model := spec.ModelName(ns, name)
	var p compose.Problems

	gw := readGateway(req)
	if why := refusedModel(model, ns, spec.GatewayName, gw.spec); why != "" {
		refuse(req, res, model, ReasonModelNameRefused, why, ResourceRoute)
		return res, nil
	}
	if reason, why := accessRefusal(spec, spec.GatewayName, gw.spec); reason != "" {
		refuse(req, res, model, reason, why)
		return res, nil
	}
	gw.judge(&p)
	bs := readBackends(req, spec, name, inRoute, spec.GatewayName, gw.spec)
	res.Warnings = slices.Concat(bs.warnings, unknownCallers(spec, spec.GatewayName, gw.spec))
	refs, tiers := bs.tiers()
	bs.judge(&p, len(spec.Backends))
	accepted, served, enforced, err := judgeServing(req, &p, spec, name, gw.spec)
	if err != nil {
		return nil, err
	}

	// Without the gateway there is no provider config to build with: what
	// was composed before is carried forward from observed state.
	if gw.spec != nil {
		b := newBuilder(req, spec, gw.spec, name, ns)
		b.compose(res, model, refs, bs, accepted, served)
		b.composeAccess(res, enforced)
	}

	c := routingReady(&p, model, len(bs.usable), len(spec.Backends), len(tiers))
	res.Conditions = []compose.Condition{c}
	res.Ready = c.Status
	since := compose.NotReadySince(req.Composite, c, req.Now, true)
	res.RequeueAfter = requeueAfter(req, &p, gw, since)
	res.Evidence = gw.evidence()
	res.Status = &v1alpha1.ModelRouteStatus{Model: model, Address: gw.address, Backends: &v1alpha1.BackendsStatus{Total: len(spec.Backends), Usable: len(bs.usable), Tiers: tiers}, NotReadySince: since, FollowedGateway: gw.followed}
	return res, nil
}

// judgeServing reads the upstream verdicts on the route's objects on the
// gateway cluster, and adds to p why each is not given: whether AI
// Gateway accepted the AIGatewayRoute (routeAccepted), Envoy Gateway the
// HTTPRoute AI Gateway generated (httpRouteServed), and whether it
// enforces the access SecurityPolicy (accessEnforced).
func judgeServing(req compose.Request, p *compose.Problems, spec *v1alpha1.ModelRouteSpec, name string, gw *gateway.RouteView) (accepted, served, enforced bool, err error) {
	if accepted, err = routeAccepted(req, p); err != nil {
		return false, false, false, err
	}
	if served, err = httpRouteServed(req, p, gw); err != nil {
		return false, false, false, err
	}
	enforced, err = accessEnforced(req, p, spec, name, gw)
	return accepted, served, enforced, err
}

// refusedModel says why the route in namespace ns may not serve model
// through the InferenceGateway gateway, or "". While the gateway is not
// read yet (gw nil), a name that starts with no namespace is not judged:
// nothing is composed without the gateway anyway.
func refusedModel(model, ns, gateway string, gw *gateway.RouteView) string {
	if _, prefixed := v1alpha1.ModelNamespace(model); !prefixed && gw == nil {
		return ""
	}
	var granted []string
	if gw != nil {
		granted = gw.UnprefixedModelNamespaces
	}
	return v1alpha1.ModelRefusal(model, ns, gateway, granted)
}

// refuse makes res the answer for a route whose spec its gateway cannot
// serve as written: nothing is composed or changed, and every observed
// object but those in drop is carried forward as it is, until the spec or
// the gateway is fixed. RoutingReady says why (reason, why) and how to fix
// it. A route that may not serve its model name drops its AIGatewayRoute,
// so a route that served the name before stops serving it (the name is
// another team's); one whose spec.access the gateway cannot enforce drops
// nothing (accessRefusal).
func refuse(req compose.Request, res *compose.Result, model, reason, why string, drop ...string) {
	res.Resources = map[string]compose.Desired{}
	res.Implied = compose.KeepObserved(req, drop...)
	var p compose.Problems
	p.Add(reason, why)
	c := p.Condition(ConditionType, ReasonAccepted, "")
	res.Conditions = []compose.Condition{c}
	since := compose.NotReadySince(req.Composite, c, req.Now, true)
	// Only a change of the spec, which wakes the route, or of the
	// gateway's grant or caller authentication, which does not, can lift
	// the refusal.
	res.RequeueAfter = WatchedGatewayRequeue
	res.Status = &v1alpha1.ModelRouteStatus{Model: model, NotReadySince: since}
}

// compositeName is the ModelRoute's name and namespace.
func compositeName(xr map[string]any) (name, ns string, err error) {
	md, _ := xr["metadata"].(map[string]any)
	name, _ = md["name"].(string)
	ns, _ = md["namespace"].(string)
	if name == "" || ns == "" {
		return "", "", errors.New("cannot compose ModelRoute: it has no metadata.name or metadata.namespace; ModelRoute must be a namespaced composite")
	}
	return name, ns, nil
}

// newBuilder is the builder of the ModelRoute name in namespace ns,
// attached to the gateway gw.
func newBuilder(req compose.Request, spec *v1alpha1.ModelRouteSpec, gw *gateway.RouteView, name, ns string) builder {
	places := make(map[string]placement, len(spec.Backends))
	for _, be := range spec.Backends {
		places[be.Name] = place(name, be.Name)
	}
	return builder{
		in: req.Input, spec: spec, name: name, namespace: ns,
		teamNamespace:  names.TeamNamespace(ns),
		providerConfig: gw.ProviderConfigName,
		sectionName:    listenerOf(gw),
		observed:       req.Observed,
		places:         places,
	}
}

// listenerOf is the listener of the gateway a model route attaches to:
// https with TLS, http without.
func listenerOf(gw *gateway.RouteView) string {
	if gw.TLS {
		return gateway.ListenerHTTPS
	}
	return gateway.ListenerHTTP
}

// compose adds every resource the ModelRoute implies and can build now.
func (b builder) compose(res *compose.Result, model string, refs []ref, bs backends, accepted, served bool) {
	set := func(n string, o *remote.Object, ready bool) {
		res.Resources[n] = compose.Desired{Object: o, Ready: ready}
	}
	set(ResourceNamespace, b.namespaceObject(), b.ready(ResourceNamespace))
	// A route with no usable backend would answer 500 and replace one
	// that serves; the observed route is carried forward instead. A new
	// route is composed whole, once every backend that is on its way (its
	// objects, its key) has arrived, so that it never grows in its first
	// minutes: AI Gateway v1.0.0's extension server panics when an
	// AIGatewayRoute names more backends than the cluster Envoy Gateway
	// translated from the HTTPRoute of its previous revision
	// (internal/extensionserver/post_translate_modify.go,
	// maybeModifyCluster; envoyproxy/ai-gateway issue 2610), and a route
	// whose backends arrive one reconcile at a time would grow that way.
	_, exists := b.observed[ResourceRoute]
	if len(refs) > 0 && (exists || len(bs.placing) == 0 && len(bs.delivering) == 0 && len(bs.caDelivering) == 0) {
		set(ResourceRoute, b.route(model, refs), accepted)
	}
	set(ResourceHTTPRoute, b.httpRoute(), served)
	// A ConfigMap the provider has never found (the gateway was composed
	// by a version that did not publish it, and has not been reconciled
	// since) holds nothing up: RoutingReady then follows the
	// InferenceGateway's condition alone (published), and the ModelRoute's
	// Ready must agree with it.
	st := b.observed[ResourceGatewayStatus]
	set(ResourceGatewayStatus, b.gatewayStatus(), st.Live() || !st.Reported())
	// The sources ConfigMap only wakes the ModelRoute; nothing serves
	// through it, so it never holds the route's Ready back, not even
	// while a Secret it follows is missing and the provider cannot apply
	// it (the missing key's backend says so).
	if src := sources(b.spec, b.namespace); len(src) > 0 {
		set(ResourceSources, b.sourceVersions(src), true)
	}
	for _, be := range b.spec.Backends {
		ca := bs.cas[be.Name]
		key := func(prefix string) string { return b.key(prefix, be.Name) }
		// A Backend that serves keeps its TLS until its new CA is on
		// the gateway cluster: Envoy Gateway refuses a Backend whose CA
		// it cannot find, and the model's rule with it (readBackends
		// says what that costs). It is carried forward meanwhile.
		_, serving := b.observed[key(prefixBackend)]
		if be.CARef() == nil || ca.delivered || !serving {
			set(key(prefixBackend), b.backend(be), b.ready(key(prefixBackend)))
		}
		if be.CARef() != nil && ca.present {
			set(key(prefixCA), b.caCopy(be, ca), ca.delivered)
		}
		set(key(prefixAIBackend), b.aiBackend(be), b.ready(key(prefixAIBackend)))
		b.composeCredentials(set, be, bs.credentials[be.Name])
	}
}

// composeCredentials adds a backend's BackendSecurityPolicy and the copy
// of its credential's Secret, for a backend that has them.
func (b builder) composeCredentials(set func(string, *remote.Object, bool), be v1alpha1.Backend, c keyState) {
	if !be.Authenticated() {
		return
	}
	key := func(prefix string) string { return b.key(prefix, be.Name) }
	set(key(prefixCredPolicy), b.credPolicy(be), b.ready(key(prefixCredPolicy)))
	if _, ok := be.CredentialSecret(); ok {
		set(key(prefixCredential), b.credential(be, c.withKey, c.version), c.delivered)
	}
}

// ready reports whether an observed Object is live and Ready.
func (b builder) ready(n string) bool { return remote.ReadyIn(b.observed, n) }
