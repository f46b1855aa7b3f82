package route

import (
	"fmt"
	"strings"

	"github.com/crossplane/function-sdk-go/errors"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
)

// ConditionType is the condition this package reports on a ModelRoute.
const ConditionType = "RoutingReady"

// Reasons for RoutingReady, in the order the user must act on them.
const (
	// ReasonAccepted: the gateway is ready and AI Gateway accepted the route.
	ReasonAccepted = "RouteAccepted"
	// ReasonWaitingForGateway: the InferenceGateway is missing or not
	// GatewayReady.
	ReasonWaitingForGateway = "WaitingForGateway"
	// ReasonNoUsableBackends: no backend can be used; every one lacks its
	// API key.
	ReasonNoUsableBackends = "NoUsableBackends"
	// ReasonWaitingForRoute: AI Gateway has not accepted the route yet.
	ReasonWaitingForRoute = "WaitingForRoute"
)

// Requirement names.
const (
	requireGateway      = "gateway"
	requireSecretPrefix = "secret-"
)

// Composer composes ModelRoutes.
type Composer struct{}

// Compose builds everything a ModelRoute needs on the gateway's cluster. It
// always composes what it can: it gates only RoutingReady on the gateway,
// never the composed resources, because Crossplane deletes whatever a
// function stops desiring, and that would take the model offline.
func (Composer) Compose(req compose.Request) (*compose.Result, error) {
	spec, err := ReadSpec(req.Composite)
	if err != nil {
		return nil, err
	}
	md, _ := req.Composite["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	if name == "" || ns == "" {
		return nil, errors.New("cannot compose ModelRoute: it has no metadata.name or metadata.namespace; ModelRoute must be a namespaced composite")
	}
	apiVersion, _ := req.Composite["apiVersion"].(string)

	res := &compose.Result{
		Resources:    map[string]compose.Desired{},
		Implied:      spec.implied(),
		Requirements: requirements(req, spec, apiVersion, ns),
	}
	model := spec.model(ns, name)
	st := &Status{Model: model, Backends: &BackendsStatus{Total: len(spec.Backends)}}
	res.Status = st

	gw := readGateway(req)
	st.Address = gw.address
	var waits []string // every reason RoutingReady is not True, in order
	var reasons []string
	if !gw.verdict.Ready {
		reasons = append(reasons, ReasonWaitingForGateway)
		waits = append(waits, gw.why)
	}

	// Which backends have their API key.
	keys := map[string]string{}
	var usable []Backend
	for _, be := range spec.Backends {
		if be.APIKey == nil {
			usable = append(usable, be)
			continue
		}
		v, problem := apiKey(req, be)
		if problem != "" {
			res.Warnings = append(res.Warnings, problem)
			continue
		}
		if v == "" {
			// Not fetched yet: Crossplane calls again with the Secret.
			continue
		}
		keys[be.Name] = v
		usable = append(usable, be)
	}
	refs, tiers := tiers(usable)
	st.Backends.Usable, st.Backends.Tiers = len(usable), tiers
	if len(usable) == 0 {
		reasons = append(reasons, ReasonNoUsableBackends)
		waits = append(waits, fmt.Sprintf("none of the %d backends can be used: every one lacks its API key", len(spec.Backends)))
	}

	accepted, acceptedMsg, err := routeAccepted(req)
	if err != nil {
		return nil, err
	}
	if !accepted {
		reasons = append(reasons, ReasonWaitingForRoute)
		waits = append(waits, acceptedMsg)
	}

	// Without the gateway there is no provider config to build with: what
	// was composed before is carried forward from observed state.
	if gw.spec != nil {
		b := builder{
			in: req.Input, spec: spec, name: name, namespace: ns,
			teamNamespace:  names.TeamNamespace(ns),
			providerConfig: gw.spec.ProviderConfigName,
			sectionName:    gateway.ListenerHTTP,
		}
		if gw.spec.TLSEnabled() {
			b.sectionName = gateway.ListenerHTTPS
		}
		ready := func(n string) bool {
			o, ok := req.Observed[n]
			return ok && o.Live() && o.Ready.True()
		}
		res.Resources[ResourceNamespace] = compose.Desired{Object: b.namespaceObject(), Ready: ready(ResourceNamespace)}
		// A route with no usable backend would answer 500 and replace one
		// that serves; the observed route is carried forward instead.
		if len(refs) > 0 {
			res.Resources[ResourceRoute] = compose.Desired{Object: b.route(model, refs), Ready: accepted}
		}
		for _, be := range spec.Backends {
			res.Resources[prefixBackend+be.Name] = compose.Desired{Object: b.backend(be), Ready: ready(prefixBackend + be.Name)}
			res.Resources[prefixAIBackend+be.Name] = compose.Desired{Object: b.aiBackend(be), Ready: ready(prefixAIBackend + be.Name)}
			if be.APIKey == nil {
				continue
			}
			res.Resources[prefixCredPolicy+be.Name] = compose.Desired{Object: b.credPolicy(be), Ready: ready(prefixCredPolicy + be.Name)}
			if v, ok := keys[be.Name]; ok {
				res.Resources[prefixCredential+be.Name] = compose.Desired{Object: b.credential(be, v), Ready: ready(prefixCredential + be.Name)}
			}
		}
	}

	c := compose.Condition{Type: ConditionType}
	if len(reasons) == 0 {
		c.Status, c.Reason = true, ReasonAccepted
		c.Message = fmt.Sprintf("model %q routes to %d of %d backends in %d priority tiers", model, len(usable), len(spec.Backends), len(tiers))
	} else {
		c.Reason, c.Message = reasons[0], waits[0]
		if len(waits) > 1 {
			c.Message += ". Also: " + strings.Join(waits[1:], "; ")
		}
	}
	res.Conditions = []compose.Condition{c}
	res.Ready = c.Status
	return res, nil
}

// requirements asks for the InferenceGateway by name, and for each API-key
// Secret by name in the ModelRoute's own namespace.
func requirements(req compose.Request, spec *Spec, apiVersion, ns string) map[string]compose.Requirement {
	gv := req.Input.InferenceGatewayAPIVersion
	if gv == "" {
		gv = apiVersion
	}
	out := map[string]compose.Requirement{
		requireGateway: {APIVersion: gv, Kind: gateway.Kind, Name: spec.GatewayName},
	}
	for _, be := range spec.Backends {
		if be.APIKey != nil {
			n := be.APIKey.SecretRef.Name
			out[requireSecretPrefix+n] = compose.Requirement{APIVersion: "v1", Kind: "Secret", Name: n, Namespace: ns}
		}
	}
	return out
}

// gatewayView is what a ModelRoute knows of its InferenceGateway.
type gatewayView struct {
	// spec is nil while the gateway is unresolved, missing or unreadable.
	spec    *gateway.Spec
	verdict gateway.Verdict
	address string
	why     string
}

func readGateway(req compose.Request) gatewayView {
	items, resolved := req.Required[requireGateway]
	switch {
	case !resolved:
		return gatewayView{why: "the InferenceGateway has not been fetched yet"}
	case len(items) == 0:
		return gatewayView{why: "the InferenceGateway named by spec.gatewayName does not exist; create it or fix spec.gatewayName"}
	}
	gw := items[0]
	md, _ := gw["metadata"].(map[string]any)
	gwName, _ := md["name"].(string)
	v := gatewayView{}
	st, _ := gw["status"].(map[string]any)
	v.address, _ = st["address"].(string)
	spec, err := gateway.ReadSpec(gw)
	if err != nil {
		v.why = fmt.Sprintf("the InferenceGateway %q cannot be used: %v", gwName, err)
		return v
	}
	v.spec = spec
	verdict, err := gateway.ReadVerdict(gw)
	if err != nil {
		v.why = fmt.Sprintf("the InferenceGateway %q has unreadable conditions: %v", gwName, err)
		return v
	}
	v.verdict = verdict
	if !verdict.Ready {
		v.why = fmt.Sprintf("the InferenceGateway %q is not GatewayReady (%s)", gwName, verdict.Reason)
		if verdict.Message != "" {
			v.why += ": " + verdict.Message
		}
	}
	return v
}

// apiKey returns a backend's API key, still base64-encoded, or a problem
// that names the backend and the Secret but never the value. Both are empty
// while Crossplane has not fetched the Secret yet: that is no problem of
// the user's, and Crossplane calls the function again with it.
func apiKey(req compose.Request, be Backend) (string, string) {
	ref := be.APIKey.SecretRef
	items, resolved := req.Required[requireSecretPrefix+ref.Name]
	switch {
	case !resolved:
		return "", ""
	case len(items) == 0:
		return "", fmt.Sprintf("backend %q is left out of the route: its API-key Secret %q does not exist in the ModelRoute's namespace; create it with the key %q", be.Name, ref.Name, ref.Key)
	}
	data, _ := items[0]["data"].(map[string]any)
	v, _ := data[ref.Key].(string)
	if v == "" {
		return "", fmt.Sprintf("backend %q is left out of the route: its API-key Secret %q has no key %q; add the key or fix spec.backends.apiKey.secretRef.key", be.Name, ref.Name, ref.Key)
	}
	return v, ""
}

// routeAccepted reads whether AI Gateway accepted the observed route.
func routeAccepted(req compose.Request) (bool, string, error) {
	o, ok := req.Observed[ResourceRoute]
	if !ok || !o.Live() {
		return false, "the AIGatewayRoute has not been observed on the gateway cluster yet", nil
	}
	acc, err := gateway.Accepted(o.Manifest())
	if err != nil {
		return false, "", errors.Wrap(err, "cannot read the observed AIGatewayRoute")
	}
	if !acc {
		return false, "AI Gateway has not accepted the AIGatewayRoute yet", nil
	}
	return true, "", nil
}
