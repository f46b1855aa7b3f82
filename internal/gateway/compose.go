package gateway

import (
	"maps"
	"slices"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/gatewayready"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
	"github.com/modelplaneai/function-inference-gateway/internal/rollout"
)

// Composer composes InferenceGateways.
type Composer struct{}

// Compose reads the gateway's spec and Secrets, judges GatewayReady
// (package gatewayready) from what the observed Objects saw on the gateway
// cluster, builds the Objects on that verdict, and reports it.
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

	// Read: the Secrets on the control plane and how far their copies got.
	f := secretFed{tls: b.readTLSSecrets(req), callers: b.readCallers(req)}
	if err := b.checkTLSNames(f.callers); err != nil {
		return refuse(req, err)
	}
	if f.clientCert, err = b.readClientCert(req); err != nil {
		return nil, err
	}
	// Judge: GatewayReady, from one read-only input.
	ev, c, err := gatewayready.Judge(b.verdictInput(req, rule, f))
	if err != nil {
		return nil, err
	}
	// Build: the Objects, each ready only on evidence.
	res := b.build(req, rule, f, ev, c)
	// While it takes the cluster over, it keeps asking for the previous
	// gateway's Objects, so that its requirements stay as they were when
	// it found them gone.
	maps.Copy(res.Requirements, cl.requirements(req.Input.ObjectNamespace, apiVersion))

	// Status: the verdict, the address and endpoints, what to look at.
	st := b.status(ev, f)
	st.NotReadySince = compose.NotReadySince(req.Composite, c, req.Now, false)
	// The claim: this gateway composes its cluster.
	st.ClusterGateway = cl.self
	res.Status, res.Conditions, res.Ready = st, []compose.Condition{c}, c.Status
	res.Warnings = slices.Concat(ev.AuthWarnings, ev.BudgetWarnings, ev.ClientCertWarnings)
	res.RequeueAfter = gatewayready.RequeueAfter(req, c, st.NotReadySince, ev.Marker.Due)
	res.Notices = b.notices(ev)
	return res, nil
}

// build composes every Object of the gateway and the composition resource
// names the spec implies, from the verdict ev and c; f is what Compose read
// of the Secret-fed features.
func (b builder) build(req compose.Request, rule *rollout.Rule, f secretFed, ev *gatewayready.Evidence, c compose.Condition) *compose.Result {
	res := &compose.Result{
		Resources:    b.resources(req.Observed, ev, f.clientCert, c, rule, reportingSince(req.Composite, req.Observed, req.Now)),
		Implied:      implied(b.spec),
		Requirements: b.secretRequirements(),
	}
	maps.Copy(res.Requirements, b.callerRequirements())
	if b.in.ProviderSanitizesSecrets {
		// Ready once seen, or once it no longer matters: it is evidence
		// only for the function's own marker.
		res.Resources[resourceFilterConfigSecret] = compose.Desired{Object: b.filterConfigSecret(), Ready: ev.FilterConfigSeen() || c.Status}
	}
	b.composeTLS(f.tls, req.Observed, res.Resources)
	b.composeClientCert(f.clientCert, req.Observed, res.Resources)
	b.composeCallers(f.callers, ev.CallerPolicyAccepted, res.Resources)
	b.impliedCallers(f.callers, req.Observed, res.Implied)
	return res
}

// notices are the Normal results: an open gateway, what is on its way, and
// the function's own marker once written.
func (b builder) notices(ev *gatewayready.Evidence) []string {
	var out []string
	if !b.spec.AuthEnabled() {
		out = append(out, b.openNotice())
	}
	out = append(out, ev.Notices...)
	if ev.Marker.Written {
		out = append(out, b.verdict().MarkerNotice(ev.Marker))
	}
	return out
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

// status reports the address, the base URLs clients use, caller
// authentication, the client certificate, and the rollout counters as last
// observed.
func (b builder) status(ev *gatewayready.Evidence, f secretFed) *v1alpha1.InferenceGatewayStatus {
	s := &v1alpha1.InferenceGatewayStatus{
		Address: ev.Address, Auth: b.authStatus(f.callers), ExtProcMarker: ev.Marker.Record,
		BackendTLS: b.backendTLSStatus(f.clientCert),
	}
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
