package gateway

import (
	"maps"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/claim"
	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
	"github.com/modelplaneai/function-inference-gateway/internal/rollout"
)

// Composer composes InferenceGateways.
type Composer struct{}

// Compose builds the gateway's Objects and judges GatewayReady from what the
// observed Objects saw on the gateway cluster.
func (Composer) Compose(req compose.Request) (*compose.Result, error) {
	spec, err := readSpec(req.Composite)
	if err != nil {
		return nil, err
	}
	rule, err := rollout.For(req.Input.ExtProcMarkerAnnotations)
	if err != nil {
		return nil, err
	}
	apiVersion, _ := req.Composite["apiVersion"].(string)
	cl := clusterOf(req, spec.ProviderConfigName)
	switch cl.Outcome {
	case claim.Lost:
		return lose(req, cl, spec.ProviderConfigName, apiVersion), nil
	case claim.WaitForPrevious:
		return waitForPrevious(req, cl, spec.ProviderConfigName, apiVersion), nil
	case claim.Won:
		// It composes the cluster: below.
	}
	b := builder{in: req.Input, spec: spec}
	secrets := b.readTLSSecrets(req)
	callers := b.readCallers(req)
	cc := b.readClientCert(req)
	ev, err := b.observe(req.Observed, rule, secrets, cc, callers, recordedMarker(req.Composite), req.Now)
	if err != nil {
		return nil, err
	}
	c := ev.condition(names.EnvoyDeployment(b.in.GatewayNamespace, b.in.GatewayName), spec.AuthEnabled())
	st := b.status(ev, callers)
	st.NotReadySince = compose.NotReadySince(req.Composite, c, req.Now, false)
	// The claim: this gateway composes its cluster.
	st.ClusterGateway = cl.self
	st.BackendTLS = b.backendTLSStatus(cc)

	res := &compose.Result{
		Resources:    b.resources(req.Observed, ev, c, rule, reportingSince(req.Composite, req.Observed, req.Now)),
		Implied:      implied(spec),
		Status:       st,
		Conditions:   []compose.Condition{c},
		Ready:        c.Status,
		Warnings:     append(ev.authWarnings, ev.clientCertWarnings...),
		Requirements: b.secretRequirements(),
		RequeueAfter: requeueAfter(req, c, st.NotReadySince, ev.marker.due),
	}
	// While it takes the cluster over, it keeps asking for the previous
	// gateway's Objects, so that its requirements stay as they were when
	// it found them gone.
	maps.Copy(res.Requirements, cl.requirements(req.Input.ObjectNamespace, apiVersion))
	maps.Copy(res.Requirements, b.callerRequirements())
	if b.in.ProviderSanitizesSecrets {
		// Ready once seen, or once it no longer matters: it is evidence
		// only for the function's own marker.
		res.Resources[resourceFilterConfigSecret] = compose.Desired{Object: b.filterConfigSecret(), Ready: ev.filterConfig.seen || c.Status}
	}
	b.composeTLS(secrets, req.Observed, res.Resources)
	b.composeClientCert(cc, req.Observed, res.Resources)
	b.composeCallers(callers, ev.callerPolicyAccepted, res.Resources)
	b.impliedCallers(callers, req.Observed, res.Implied)
	if !spec.AuthEnabled() {
		res.Notices = append(res.Notices, b.openNotice())
	}
	res.Notices = append(res.Notices, ev.notices...)
	if ev.marker.written {
		res.Notices = append(res.Notices, b.markerNotice(ev.marker))
	}
	return res, nil
}

// resources are the Objects every InferenceGateway composes. Each is ready
// only on evidence the function read itself.
func (b builder) resources(obs map[string]remote.Observed, ev *evidence, c compose.Condition, rule *rollout.Rule, reporting string) map[string]compose.Desired {
	ready := func(name string) bool { return remote.ReadyIn(obs, name) }
	return map[string]compose.Desired{
		resourceNamespace:       {Object: b.namespace(), Ready: ready(resourceNamespace)},
		resourceEnvoyProxy:      {Object: b.envoyProxy(ev.marker.value, ev.backendTLS), Ready: ready(resourceEnvoyProxy)},
		resourceGateway:         {Object: b.gateway(), Ready: ev.address != "" && ev.listenersProgrammed},
		resourceAnchorRoute:     {Object: b.anchorRoute(), Ready: ev.anchorAccepted},
		resourceFailoverPolicy:  {Object: b.failoverPolicy(), Ready: ready(resourceFailoverPolicy)},
		resourceClientPolicy:    {Object: b.clientPolicy(), Ready: ev.clientPolicyAccepted},
		ResourceEnvoyDeployment: {Object: b.envoyDeployment(rule.Expression), Ready: ev.deployment != nil && ev.rollout.Ready},
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
func (b builder) status(ev *evidence, c callers) *v1alpha1.InferenceGatewayStatus {
	s := &v1alpha1.InferenceGatewayStatus{Address: ev.address, Auth: b.authStatus(c), ExtProcMarker: ev.marker.record}
	if host := b.spec.Hostname; host != "" || ev.address != "" {
		if host == "" {
			host = ev.address
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
	if d := ev.deployment; d != nil {
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
