package gateway

import (
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
	spec, err := ReadSpec(req.Composite)
	if err != nil {
		return nil, err
	}
	rule, err := rollout.For(req.Input.ExtProcMarkerAnnotations)
	if err != nil {
		return nil, err
	}
	b := builder{in: req.Input, spec: spec}
	ev, err := b.observe(req.Observed, rule)
	if err != nil {
		return nil, err
	}
	v := ev.verdict(names.EnvoyDeployment(b.in.GatewayNamespace, b.in.GatewayName))

	// Each Object is ready only on evidence the function read itself.
	objectReady := func(name string) bool {
		o, ok := req.Observed[name]
		return ok && o.Live() && o.Ready.True()
	}
	res := &compose.Result{
		Resources: map[string]compose.Desired{
			ResourceNamespace:       {Object: b.namespace(), Ready: objectReady(ResourceNamespace)},
			ResourceEnvoyProxy:      {Object: b.envoyProxy(), Ready: objectReady(ResourceEnvoyProxy)},
			ResourceGateway:         {Object: b.gateway(), Ready: ev.address != ""},
			ResourceAnchorRoute:     {Object: b.anchorRoute(), Ready: ev.anchorAccepted},
			ResourceFailoverPolicy:  {Object: b.failoverPolicy(), Ready: objectReady(ResourceFailoverPolicy)},
			ResourceClientPolicy:    {Object: b.clientPolicy(), Ready: ev.clientPolicyAccepted},
			ResourceEnvoyDeployment: {Object: b.envoyDeployment(rule.Expression), Ready: ev.deployment != nil && ev.rollout.Ready},
		},
		Implied:    map[string]bool{},
		Status:     b.status(ev),
		Conditions: []compose.Condition{{Type: ConditionType, Status: v.Ready, Reason: v.Reason, Message: v.Message}},
		Ready:      v.Ready,
	}
	for _, n := range Resources {
		res.Implied[n] = true
	}
	return res, nil
}

// status reports the address, the base URLs clients use, and the rollout
// counters as last observed.
func (b builder) status(ev *evidence) *Status {
	s := &Status{Address: ev.address}
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
		s.Endpoints = &Endpoints{OpenAI: scheme + "://" + host + "/v1", Anthropic: scheme + "://" + host + "/anthropic"}
	}
	if d := ev.deployment; d != nil {
		s.Rollout = &Rollout{
			Generation:         d.Generation,
			ObservedGeneration: d.Status.ObservedGeneration,
			Replicas:           d.Status.Replicas,
			UpdatedReplicas:    d.Status.UpdatedReplicas,
			AvailableReplicas:  d.Status.AvailableReplicas,
		}
	}
	return s
}

// ReadVerdict reads the GatewayReady condition of an observed
// InferenceGateway, as a ModelRoute sees it through a required resource.
func ReadVerdict(xr map[string]any) (Verdict, error) {
	st, _ := xr["status"].(map[string]any)
	conds, err := remote.Conditions(st)
	if err != nil {
		return Verdict{}, err
	}
	c, ok := conds[ConditionType]
	if !ok {
		return Verdict{Reason: "NotReported", Message: "the gateway has not reported " + ConditionType + " yet"}, nil
	}
	return Verdict{Ready: c.True(), Reason: c.Reason, Message: c.Message}, nil
}
