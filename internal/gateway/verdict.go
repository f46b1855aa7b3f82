package gateway

import (
	"maps"
	"slices"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/gatewayready"
	"github.com/modelplaneai/function-inference-gateway/internal/rollout"
)

// The one input to GatewayReady's verdict (gatewayready.Judge): what
// Compose read of the gateway, put in the verdict's own words. The topic
// files read their Secrets (tls.go, mtls.go, callers.go) and build their
// Objects; only here does what they read meet the verdict.

// secretFed is what Compose read of the gateway's Secret-fed features on
// the control plane, and of their copies and the client Certificate on the
// gateway cluster.
type secretFed struct {
	tls        []tlsSecret
	callers    callers
	clientCert *clientCert
}

// verdictResources are the composition resources whose observed Objects
// hold the evidence for GatewayReady.
var verdictResources = gatewayready.Resources{
	Gateway: resourceGateway, AnchorRoute: resourceAnchorRoute, ClientPolicy: resourceClientPolicy, TrafficPolicy: resourceFailoverPolicy,
	EnvoyDeployment: ResourceEnvoyDeployment, EnvoyProxy: resourceEnvoyProxy, FilterConfigSecret: resourceFilterConfigSecret,
	CallerAuth: ResourceCallerAuth,
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

// verdictInput is everything GatewayReady is judged on.
func (b builder) verdictInput(req compose.Request, rule *rollout.Rule, f secretFed) gatewayready.Input {
	in := gatewayready.Input{
		Gateway: b.verdict(), Observed: req.Observed, Rule: rule,
		Recorded: gatewayready.RecordedMarker(req.Composite), Now: req.Now,
		BudgetWarnings: b.unknownBudgetCallers(f.callers),
	}
	for _, s := range f.tls {
		in.TLS = append(in.TLS, s.judged())
	}
	if c := f.clientCert; c != nil {
		in.ClientCert = &gatewayready.ClientCert{Issued: c.issued, Problem: c.problem, Notice: c.notice}
		if c.ca != nil {
			ca := c.ca.judged()
			in.ClientCert.CA = &ca
		}
	}
	if b.spec.AuthEnabled() {
		in.Callers = b.judgedCallers(f.callers)
	}
	return in
}

// judged is the Secret as the verdict reads it.
func (s tlsSecret) judged() gatewayready.Secret {
	return gatewayready.Secret{
		Name: s.name, Problem: s.problem, Present: s.present, Serving: s.serving(), Renewing: s.renewing(),
		Version: s.version, LiveVersion: s.copy.LiveVersion,
	}
}

// judgedCallers are the caller Secrets as the verdict reads them.
func (b builder) judgedCallers(c callers) *gatewayready.Callers {
	out := &gatewayready.Callers{Resolved: c.resolved, Notes: c.notes, Waits: c.waits}
	sel := b.spec.Auth.APIKey.SecretSelector.MatchLabels
	for _, k := range slices.Sorted(maps.Keys(sel)) {
		out.Selector = append(out.Selector, k+"="+sel[k])
	}
	for _, s := range c.selected {
		out.Selected = append(out.Selected, gatewayready.Caller{Name: s.name, Problem: s.problem, InUse: s.inUse})
	}
	return out
}
