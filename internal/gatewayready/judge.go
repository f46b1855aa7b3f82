package gatewayready

import (
	"time"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
	"github.com/modelplaneai/function-inference-gateway/internal/rollout"
)

// Input is everything GatewayReady is judged on, read before the verdict
// and never changed by it: the gateway, the observed Objects, the rollout
// rule, the marker recorded in the XR's status, and what package gateway
// read of its Secret-fed features on the control plane.
type Input struct {
	// Gateway is the InferenceGateway judged.
	Gateway Gateway
	// Observed are the observed composed resources, by composition
	// resource name.
	Observed map[string]remote.Observed
	// Rule is the rollout rule applied to the Envoy Deployment.
	Rule *rollout.Rule
	// Recorded is the ext-proc marker as the XR's status recorded it
	// (RecordedMarker).
	Recorded *v1alpha1.MarkerStatus
	// Now is the time of this reconcile.
	Now time.Time

	// TLS are the https listener's certificateRefs' Secrets; empty
	// without TLS.
	TLS []Secret
	// ClientCert is the client certificate to backends; nil without one.
	ClientCert *ClientCert
	// Callers are the caller Secrets; nil without caller authentication.
	Callers *Callers
	// BudgetWarnings name caller limits of spec.budgets that apply to no
	// request.
	BudgetWarnings []string
}

// Judge is the one verdict on GatewayReady: every check, in the order of
// the conditions table (docs/conditions.md), adds its problem to the
// evidence, and the first problem is the condition's reason. It trusts
// only a live manifest: an observe-only Object keeps its old manifest and
// Ready condition after the remote object is gone. It also decides on the
// function's own ext-proc marker (marker.go), which it plans once the
// filter-config Secret and the anchor route have been read.
func Judge(in Input) (*Evidence, compose.Condition, error) {
	g, obs := in.Gateway, in.Observed
	e := &Evidence{BudgetWarnings: in.BudgetWarnings}
	g.observeFilterConfig(e, obs)
	e.observeTLS(in.TLS)
	e.observeClientCert(in.ClientCert)
	for _, check := range []func(*Evidence, map[string]remote.Observed) error{
		g.observeGateway, g.observeAnchor, g.observeClientPolicy, g.observeTrafficPolicy, g.observeCallers(in.Callers),
	} {
		if err := check(e, obs); err != nil {
			return nil, compose.Condition{}, err
		}
	}
	if err := g.observeDeployment(e, obs, in.Rule, in.Recorded, in.Now); err != nil {
		return nil, compose.Condition{}, err
	}
	c := e.condition(names.EnvoyDeployment(g.In.GatewayNamespace, g.In.GatewayName), in.Callers != nil)
	return e, c, nil
}
