package gateway

import (
	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
)

// refuse is the result for an InferenceGateway whose spec the function
// refuses (compose.Refuse): everything it composed stays as it is, but the
// gateway-status ConfigMap, which now says GatewayReady False with
// SpecRefused, so that every ModelRoute on the gateway hears of it within
// a watch event rather than at its TTL. A gateway that has composed
// nothing yet is answered Fatal: there is nothing to keep serving, and
// crossplane render then fails on the bad spec.
func refuse(req compose.Request, refusal error) (*compose.Result, error) {
	res, ok := compose.Refuse(req, ConditionType, refusal)
	if !ok {
		return nil, refusal
	}
	if o, ok := req.Observed[ResourceGatewayStatus]; ok {
		cm := remote.Carry(o.Object())
		if m, ok := nested(cm, "spec", "forProvider", "manifest"); ok {
			data, _ := m["data"].(map[string]any)
			if data == nil {
				data = map[string]any{}
				m["data"] = data
			}
			data[StatusKeyReady] = "False"
			data[StatusKeyReason] = compose.ReasonSpecRefused
		}
		res.Resources[ResourceGatewayStatus] = compose.Desired{Object: cm, Ready: o.Live() && o.Ready.True()}
	}
	// The spec is left as it is until someone fixes it, which wakes the
	// gateway; while the breaker holds its events back, the back-off's
	// slowest look finds the fix.
	res.RequeueAfter = compose.GatewayBackoff.Max
	return res, nil
}

// nested is the object at path in m, if every step is one.
func nested(m map[string]any, path ...string) (map[string]any, bool) {
	for _, k := range path {
		next, ok := m[k].(map[string]any)
		if !ok {
			return nil, false
		}
		m = next
	}
	return m, true
}
