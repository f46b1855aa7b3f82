package fn

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/response"
)

func TestTTL(t *testing.T) {
	rolled := deploymentManifest(2, 2, true, 2, 2, 2)
	rolling := deploymentManifest(3, 3, true, 3, 1, 2)
	ab := []obj{backend("a", 1, 1, "key-a"), backend("b", 0, 1, "")}
	cases := map[string]struct {
		reason string
		req    *fnv1.RunFunctionRequest
		fatal  bool
		want   time.Duration
	}{
		"GatewayReady": {
			reason: "A ready gateway is reconciled at the SDK's default TTL.",
			req:    newRequest(t, gatewayXR(nil), observedGateway("203.0.113.10", true, rolled, true), nil),
			want:   response.DefaultTTL,
		},
		"GatewayRollingOut": {
			reason: "While old-template pods remain, Crossplane should look again soon: the watch events that end the rollout may be held back by its circuit breaker.",
			req:    newRequest(t, gatewayXR(nil), observedGateway("203.0.113.10", true, rolling, true), nil),
			want:   NotReadyTTL,
		},
		"RouteReady": {
			reason: "A routing ModelRoute is reconciled at the SDK's default TTL.",
			req:    newRequest(t, routeXR(ab...), observedRoute(true), map[string][]obj{"gateway": gwReady, "secret-key-a": keyA}),
			want:   response.DefaultTTL,
		},
		"RouteWaitingForGateway": {
			reason: "A ModelRoute learns of its gateway only through required resources, which Crossplane does not watch: look again soon.",
			req:    newRequest(t, routeXR(ab...), observedRoute(true), map[string][]obj{"gateway": gwRolling, "secret-key-a": keyA}),
			want:   NotReadyTTL,
		},
		"Fatal": {
			reason: "A Fatal result keeps the default TTL: the input needs a person, not a quicker retry.",
			req:    newRequest(t, gatewayXR(obj{"providerConfigName": 7}), nil, nil),
			fatal:  true,
			want:   response.DefaultTTL,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, tc.req)
			fatal := len(rsp.GetResults()) > 0 && rsp.GetResults()[0].GetSeverity() == fnv1.Severity_SEVERITY_FATAL
			if fatal != tc.fatal {
				t.Fatalf("%s\nRunFunction(...): fatal %t, want %t: %v", tc.reason, fatal, tc.fatal, rsp.GetResults())
			}
			if diff := cmp.Diff(tc.want, rsp.GetMeta().GetTtl().AsDuration()); diff != "" {
				t.Errorf("%s\nRunFunction(...).Meta.Ttl: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
