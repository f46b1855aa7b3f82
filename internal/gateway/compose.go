package gateway

import (
	"maps"
	"slices"
	"time"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/gatewayready"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
	"github.com/modelplaneai/function-inference-gateway/internal/rollout"
)

// Composer composes InferenceGateways.
type Composer struct{}

// Compose builds the gateway's Objects and judges GatewayReady (package
// gatewayready) from what the observed Objects saw on the gateway cluster.
func (Composer) Compose(req compose.Request) (*compose.Result, error) {
	spec, err := readSpec(req.Composite)
	if err != nil {
		return refuse(req, err)
	}
	rule, err := rollout.For(req.Input.ExtProcMarkerAnnotations)
	if err != nil {
		return nil, err
	}
	apiVersion, _ := req.Composite["apiVersion"].(string)
	cl := clusterOf(req, spec.ProviderConfigName)
	if res := notComposing(req, cl, spec.ProviderConfigName, apiVersion); res != nil {
		return res, nil
	}
	b := builder{in: req.Input, spec: spec}
	secrets := b.readTLSSecrets(req)
	callers := b.readCallers(req)
	if err := b.checkTLSNames(callers); err != nil {
		return refuse(req, err)
	}
	cc := b.readClientCert(req)
	g := b.verdict()
	ev, err := b.observe(g, req.Observed, rule, secrets, cc, callers, gatewayready.RecordedMarker(req.Composite), req.Now)
	if err != nil {
		return nil, err
	}
	ev.BudgetWarnings = b.unknownBudgetCallers(callers)
	c := ev.Condition(names.EnvoyDeployment(b.in.GatewayNamespace, b.in.GatewayName), spec.AuthEnabled())
	st := b.status(ev, callers)
	st.NotReadySince = compose.NotReadySince(req.Composite, c, req.Now, false)
	// The claim: this gateway composes its cluster.
	st.ClusterGateway = cl.self
	st.BackendTLS = b.backendTLSStatus(cc)

	res := &compose.Result{
		Resources:    b.resources(req.Observed, ev, cc, c, rule, reportingSince(req.Composite, req.Observed, req.Now)),
		Implied:      implied(spec),
		Status:       st,
		Conditions:   []compose.Condition{c},
		Ready:        c.Status,
		Warnings:     slices.Concat(ev.AuthWarnings, ev.BudgetWarnings, ev.ClientCertWarnings),
		Requirements: b.secretRequirements(),
		RequeueAfter: gatewayready.RequeueAfter(req, c, st.NotReadySince, ev.Marker.Due),
	}
	// While it takes the cluster over, it keeps asking for the previous
	// gateway's Objects, so that its requirements stay as they were when
	// it found them gone.
	maps.Copy(res.Requirements, cl.requirements(req.Input.ObjectNamespace, apiVersion))
	maps.Copy(res.Requirements, b.callerRequirements())
	if b.in.ProviderSanitizesSecrets {
		// Ready once seen, or once it no longer matters: it is evidence
		// only for the function's own marker.
		res.Resources[resourceFilterConfigSecret] = compose.Desired{Object: b.filterConfigSecret(), Ready: ev.FilterConfigSeen() || c.Status}
	}
	b.composeTLS(secrets, req.Observed, res.Resources)
	b.composeClientCert(cc, req.Observed, res.Resources)
	b.composeCallers(callers, ev.CallerPolicyAccepted, res.Resources)
	b.impliedCallers(callers, req.Observed, res.Implied)
	if !spec.AuthEnabled() {
		res.Notices = append(res.Notices, b.openNotice())
	}
	res.Notices = append(res.Notices, ev.Notices...)
	if ev.Marker.Written {
		res.Notices = append(res.Notices, g.MarkerNotice(ev.Marker))
	}
	return res, nil
}

// observe reads the evidence for GatewayReady from the observed Objects,
// each check adding a problem in the order of the conditions table: package
// gatewayready's checks of what the gateway cluster shows, with this
// package's checks of its Secret-fed features (TLS, the client certificate,
// caller authentication) in their places. It trusts only a live manifest:
// an observe-only Object keeps its old manifest and Ready condition after
// the remote object is gone.
//
// It also decides on the function's own ext-proc marker (package
// gatewayready, marker.go), whose value composed before is carried, and
// whose settle time counts from the first sight recorded in rec. g is the
// gateway as package gatewayready judges it (verdict).
func (b builder) observe(g gatewayready.Gateway, obs map[string]remote.Observed, rule *rollout.Rule, secrets []tlsSecret, cc *clientCert, c callers, rec *v1alpha1.MarkerStatus, now time.Time) (*gatewayready.Evidence, error) {
	e := &gatewayready.Evidence{}
	g.ObserveFilterConfig(e, obs)
	b.observeTLS(e, secrets)
	if err := b.observeClientCert(e, obs, cc, now); err != nil {
		return nil, err
	}
	for _, check := range []func(*gatewayready.Evidence, map[string]remote.Observed) error{g.ObserveGateway, g.ObserveAnchor, g.ObserveClientPolicy, g.ObserveTrafficPolicy, b.observeCallerAuth(g, c)} {
		if err := check(e, obs); err != nil {
			return nil, err
		}
	}
	return e, g.ObserveDeployment(e, obs, rule, rec, now)
}

// verdictResources are the composition resources whose observed Objects
// hold the evidence for GatewayReady.
var verdictResources = gatewayready.Resources{
	Gateway: resourceGateway, AnchorRoute: resourceAnchorRoute, ClientPolicy: resourceClientPolicy, TrafficPolicy: resourceFailoverPolicy,
	EnvoyDeployment: ResourceEnvoyDeployment, EnvoyProxy: resourceEnvoyProxy, FilterConfigSecret: resourceFilterConfigSecret,
}

// verdict is the gateway as package gatewayready judges it: the listeners
// composed on the Gateway, http and https with TLS, and the composition
// resources that hold the evidence.
func (b builder) verdict() gatewayready.Gateway {
	listeners := []string{ListenerHTTP}
	if b.spec.TLSEnabled() {
		listeners = append(listeners, ListenerHTTPS)
	}
	return gatewayready.Gateway{In: b.in, Listeners: listeners, Resources: verdictResources}
}

// resources are the Objects every InferenceGateway composes. Each is ready
// only on evidence the function read itself. cc is the client certificate
// as observe judged it: the EnvoyProxy names it once it is issued.
func (b builder) resources(obs map[string]remote.Observed, ev *gatewayready.Evidence, cc *clientCert, c compose.Condition, rule *rollout.Rule, reporting string) map[string]compose.Desired {
	ready := func(name string) bool { return remote.ReadyIn(obs, name) }
	return map[string]compose.Desired{
		resourceNamespace:       {Object: b.namespace(), Ready: ready(resourceNamespace)},
		resourceEnvoyProxy:      {Object: b.envoyProxy(ev.Marker.Value, b.envoyProxyBackendTLS(cc)), Ready: ready(resourceEnvoyProxy)},
		resourceGateway:         {Object: b.gateway(), Ready: ev.Address != "" && ev.ListenersProgrammed},
		resourceAnchorRoute:     {Object: b.anchorRoute(), Ready: ev.AnchorAccepted},
		resourceFailoverPolicy:  {Object: b.failoverPolicy(), Ready: ev.TrafficPolicyAccepted},
		resourceClientPolicy:    {Object: b.clientPolicy(), Ready: ev.ClientPolicyAccepted},
		ResourceEnvoyDeployment: {Object: b.envoyDeployment(rule.Expression), Ready: ev.Deployment != nil && ev.Rollout.Ready},
		ResourceGatewayStatus:   {Object: b.gatewayStatus(c, reporting), Ready: ready(ResourceGatewayStatus)},

		ResourceFrontDoorNamespace: {Object: b.frontDoorNamespace(), Ready: ready(ResourceFrontDoorNamespace)},
		ResourceHealthFilter:       {Object: b.healthFilter(), Ready: ready(ResourceHealthFilter)},
		ResourceHealthRoute:        {Object: b.healthRoute(), Ready: ready(ResourceHealthRoute)},
		ResourceFrontDoorPolicy:    {Object: b.frontDoorPolicy(), Ready: ready(ResourceFrontDoorPolicy)},
	}
}

// composeTLS adds, with TLS, the HTTPS redirect and the TLS Secrets'
// copies. A TLS Secret that is missing on the control plane is not built:
// the one composed before, if any, is carried forward (it is implied), so
// the https listener keeps its certificate.
func (b builder) composeTLS(secrets []tlsSecret, obs map[string]remote.Observed, res map[string]compose.Desired) {
	if !b.spec.TLSEnabled() {
		return
	}
	res[ResourceRedirectRoute] = compose.Desired{Object: b.redirectRoute(), Ready: remote.ReadyIn(obs, ResourceRedirectRoute)}
	for _, s := range secrets {
		if s.present {
			// Ready while a copy with values serves, a renewal on its way
			// included, so the composite does not flap on a renewal.
			res[ResourceTLSSecretPrefix+s.name] = compose.Desired{Object: b.tlsSecretObject(s), Ready: s.serving()}
		}
	}
}

// status reports the address, the base URLs clients use, and the rollout
// counters as last observed.
func (b builder) status(ev *gatewayready.Evidence, c callers) *v1alpha1.InferenceGatewayStatus {
	s := &v1alpha1.InferenceGatewayStatus{Address: ev.Address, Auth: b.authStatus(c), ExtProcMarker: ev.Marker.Record}
	if host := b.spec.Hostname; host != "" || ev.Address != "" {
		if host == "" {
			host = ev.Address
		}
		scheme := "http"
		if b.spec.TLSEnabled() {
			scheme = "https"
		}
		// AI Gateway serves OpenAI under /v1 and Anthropic under
		// /anthropic/v1 (ai-gateway v1.0.0 ext-proc endpoint prefixes
		// "openai:/v1,anthropic:/anthropic/v1"). SDKs take the base URL and
		// add the rest: the OpenAI SDK wants .../v1, the Anthropic SDK the
		// part before /v1.
		s.Endpoints = &v1alpha1.Endpoints{OpenAI: scheme + "://" + host + "/v1", Anthropic: scheme + "://" + host + "/anthropic"}
	}
	if d := ev.Deployment; d != nil {
		s.Rollout = &v1alpha1.Rollout{
			Generation:         d.Generation,
			ObservedGeneration: d.Status.ObservedGeneration,
			Replicas:           d.Status.Replicas,
			UpdatedReplicas:    d.Status.UpdatedReplicas,
			AvailableReplicas:  d.Status.AvailableReplicas,
		}
	}
	return s
}
