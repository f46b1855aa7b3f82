package fn

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/response"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
)

// gatewayFalseSince is a rolling gateway whose observed GatewayReady has
// been False since at.
func gatewayFalseSince(at time.Time) obj {
	return gatewayWithCondition(at, "False", "OldReplicasPresent")
}

// gatewayTrueSince is a gateway whose observed GatewayReady has been True
// since at.
func gatewayTrueSince(at time.Time) obj {
	return gatewayWithCondition(at, "True", "Serving")
}

func gatewayWithCondition(at time.Time, status, reason string) obj {
	xr := gatewayXR(nil)
	xr["status"] = obj{"conditions": []any{obj{"type": "GatewayReady", "status": status, "reason": reason, "lastTransitionTime": at.UTC().Format(time.RFC3339)}}}
	return xr
}

// gatewayResponsive is a ready gateway whose Responsive condition has had
// status since at.
func gatewayResponsive(at time.Time, status string) obj {
	xr := gatewayTrueSince(at.Add(-time.Hour))
	xr["status"].(obj)["conditions"] = append(xr["status"].(obj)["conditions"].([]any),
		obj{"type": "Responsive", "status": status, "reason": "WatchCircuitOpen", "lastTransitionTime": at.UTC().Format(time.RFC3339)})
	return xr
}

func TestTTL(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
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
		"GatewayReadyBreakerOpen": {
			reason: "A ready gateway whose watch events Crossplane's circuit breaker holds back looks again every 5 s, not at the one-minute TTL.",
			req:    newRequest(t, gatewayResponsive(now.Add(-time.Minute), "False"), observedGateway("203.0.113.10", true, rolled, true), nil),
			want:   compose.SlowRequeue,
		},
		"GatewayReadyBreakerClosedAgain": {
			reason: "Responsive=False for longer than the breaker's cooldown: the breaker is closed; the SDK's default TTL.",
			req:    newRequest(t, gatewayResponsive(now.Add(-6*time.Minute), "False"), observedGateway("203.0.113.10", true, rolled, true), nil),
			want:   response.DefaultTTL,
		},
		"GatewayReadyResponsive": {
			reason: "Responsive=True: watch events arrive; the SDK's default TTL.",
			req:    newRequest(t, gatewayResponsive(now.Add(-time.Minute), "True"), observedGateway("203.0.113.10", true, rolled, true), nil),
			want:   response.DefaultTTL,
		},
		"GatewayRollingOut": {
			reason: "GatewayReady just turned False: look again in a second, because the watch events that end the rollout may be held back by Crossplane's circuit breaker.",
			req:    newRequest(t, gatewayXR(nil), observedGateway("203.0.113.10", true, rolling, true), nil),
			want:   compose.FastRequeue,
		},
		"GatewayRollingOutFor90s": {
			reason: "False for 90 s, within FastFor: still every second.",
			req:    newRequest(t, gatewayFalseSince(now.Add(-90*time.Second)), observedGateway("203.0.113.10", true, rolling, true), nil),
			want:   compose.FastRequeue,
		},
		"GatewayRollingOutFor5m": {
			reason: "False for 5 minutes: back off to every 5 s.",
			req:    newRequest(t, gatewayFalseSince(now.Add(-5*time.Minute)), observedGateway("203.0.113.10", true, rolling, true), nil),
			want:   compose.SlowRequeue,
		},
		"GatewayRollingOutFor20m": {
			reason: "False for 20 minutes: stuck; the not-ready default.",
			req:    newRequest(t, gatewayFalseSince(now.Add(-20*time.Minute)), observedGateway("203.0.113.10", true, rolling, true), nil),
			want:   NotReadyTTL,
		},
		"GatewayWasTrue": {
			reason: "The observed condition is still True from before: this is the first second of a False spell.",
			req:    newRequest(t, gatewayTrueSince(now.Add(-time.Hour)), observedGateway("203.0.113.10", true, rolling, true), nil),
			want:   compose.FastRequeue,
		},
		"GatewaySecretsMissing": {
			reason: "Waiting for a person to create callers' Secrets: no hurry.",
			req:    newRequest(t, gatewayXR(authSpec()), authObserved(nil), map[string][]obj{"caller-secrets": {}}),
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
			f := New(logging.NewNopLogger())
			f.now = func() time.Time { return now }
			rsp, err := f.RunFunction(t.Context(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
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
