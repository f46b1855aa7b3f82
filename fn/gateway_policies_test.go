package fn

import (
	"encoding/json"
	"testing"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// typedManifest decodes the manifest of a desired Object into its upstream
// typed spec.
func typedManifest[S any](t *testing.T, m obj) S {
	t.Helper()
	var into struct {
		Spec S `json:"spec"`
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &into); err != nil {
		t.Fatal(err)
	}
	return into.Spec
}

func TestGatewayPolicies(t *testing.T) {
	target := egv1a1.PolicyTargetReferences{TargetRefs: []gwapiv1.LocalPolicyTargetReferenceWithSectionName{{
		LocalPolicyTargetReference: gwapiv1.LocalPolicyTargetReference{Group: "gateway.networking.k8s.io", Kind: "Gateway", Name: "inference-gateway"},
	}}}
	passive := &egv1a1.PassiveHealthCheck{
		Interval: ptr.To(gwapiv1.Duration("5s")), Consecutive5xxErrors: ptr.To[uint32](5),
		BaseEjectionTime: ptr.To(gwapiv1.Duration("30s")), MaxEjectionPercent: ptr.To[int32](100),
	}
	ctp := func(limit string) egv1a1.ClientTrafficPolicySpec {
		return egv1a1.ClientTrafficPolicySpec{
			PolicyTargetReferences: target,
			Connection:             &egv1a1.ClientConnection{BufferLimit: new(resource.MustParse(limit))},
			HTTP2: &egv1a1.HTTP2Settings{
				InitialStreamWindowSize:     new(resource.MustParse("16Mi")),
				InitialConnectionWindowSize: new(resource.MustParse("24Mi")),
			},
			// A client's own caller header never gets past the front door.
			Headers: &egv1a1.HeaderSettings{EarlyRequestHeaders: &egv1a1.HTTPHeaderFilter{Remove: []string{"x-modelplane-caller"}}},
		}
	}
	btp := func(retries int32, on *egv1a1.RetryOn, threshold uint32) egv1a1.BackendTrafficPolicySpec {
		return egv1a1.BackendTrafficPolicySpec{
			PolicyTargetReferences: target,
			ClusterSettings: egv1a1.ClusterSettings{
				Retry:       &egv1a1.Retry{NumRetries: new(retries), NumAttemptsPerPriority: ptr.To[int32](1), RetryOn: on},
				HealthCheck: &egv1a1.HealthCheck{Passive: passive, PanicThreshold: new(threshold)},
			},
		}
	}
	safe := []egv1a1.TriggerEnum{egv1a1.ConnectFailure, egv1a1.RefusedStream, egv1a1.ResetBeforeRequest, egv1a1.RetriableStatusCodes}
	type policyCase struct {
		reason string
		spec   obj
		client egv1a1.ClientTrafficPolicySpec
		backnd egv1a1.BackendTrafficPolicySpec
	}
	cases := map[string]policyCase{
		"Defaults": {
			reason: "Bodies up to 50Mi pass; 429 and 503 and failures before the request was sent fail over; Envoy's own panic threshold.",
			spec:   obj{"providerConfigName": "gpu-cluster-1"},
			client: ctp("50Mi"),
			backnd: btp(3, &egv1a1.RetryOn{Triggers: safe, HTTPStatusCodes: []egv1a1.HTTPStatus{429, 503}}, 50),
		},
		"Tuned": {
			reason: "Every setting reaches its policy; status codes bring the retriable-status-codes trigger along.",
			spec: obj{"providerConfigName": "gpu-cluster-1", "connection": obj{"bufferLimit": "100Mi"},
				"failover": obj{"numRetries": 1, "panicThreshold": 0, "retryOn": obj{"triggers": []any{"connect-failure", "5xx"}, "httpStatusCodes": []any{429}}}},
			client: ctp("100Mi"),
			backnd: btp(1, &egv1a1.RetryOn{Triggers: []egv1a1.TriggerEnum{egv1a1.ConnectFailure, egv1a1.Error5XX, egv1a1.RetriableStatusCodes}, HTTPStatusCodes: []egv1a1.HTTPStatus{429}}, 0),
		},
		"NoStatusCodes": {
			reason: "An empty list of status codes retries on none; the default triggers stay.",
			spec:   obj{"providerConfigName": "gpu-cluster-1", "failover": obj{"retryOn": obj{"httpStatusCodes": []any{}}}},
			client: ctp("50Mi"),
			backnd: btp(3, &egv1a1.RetryOn{Triggers: safe}, 50),
		},
	}
	auth := obj{"apiKey": obj{"secretSelector": obj{"matchLabels": obj{"modelplane.ai/callers": "true"}}}}
	withBudgets := func(budgets ...any) obj {
		return obj{"providerConfigName": "gpu-cluster-1", "auth": auth, "budgets": budgets}
	}
	defaults := func(rl *egv1a1.RateLimitSpec) egv1a1.BackendTrafficPolicySpec {
		p := btp(3, &egv1a1.RetryOn{Triggers: safe, HTTPStatusCodes: []egv1a1.HTTPStatus{429, 503}}, 50)
		p.RateLimit = rl
		return p
	}
	// A budget's cost: nothing on the request, which only checks the
	// counter, and the tokens AI Gateway reports under key once the
	// response is done.
	tokens := func(key string) *egv1a1.RateLimitCost {
		return &egv1a1.RateLimitCost{
			Request:  &egv1a1.RateLimitCostSpecifier{From: egv1a1.RateLimitCostFromNumber, Number: ptr.To[uint64](0)},
			Response: &egv1a1.RateLimitCostSpecifier{From: egv1a1.RateLimitCostFromMetadata, Metadata: &egv1a1.RateLimitCostMetadata{Namespace: "io.envoy.ai_gateway", Key: key}},
		}
	}
	perCaller := egv1a1.HeaderMatch{Type: ptr.To(egv1a1.HeaderMatchDistinct), Name: "x-modelplane-caller"}
	caller := func(name string, invert bool) egv1a1.HeaderMatch {
		m := egv1a1.HeaderMatch{Type: ptr.To(egv1a1.HeaderMatchExact), Name: "x-modelplane-caller", Value: new(name)}
		if invert {
			m.Invert = new(true)
		}
		return m
	}
	selects := func(h ...egv1a1.HeaderMatch) []egv1a1.RateLimitSelectCondition {
		return []egv1a1.RateLimitSelectCondition{{Headers: h}}
	}
	cases["BudgetPerModel"] = policyCase{
		reason: "A per-model budget is one unshared rule, a counter per caller on each route, charged the total tokens after the response.",
		spec:   withBudgets(obj{"tokens": "Total", "limit": 100000, "per": "Day"}),
		client: ctp("50Mi"),
		backnd: defaults(&egv1a1.RateLimitSpec{Global: &egv1a1.GlobalRateLimit{Rules: []egv1a1.RateLimitRule{{
			ClientSelectors: selects(perCaller),
			Limit:           egv1a1.RateLimitValue{Requests: 100000, Unit: egv1a1.RateLimitUnitDay},
			Cost:            tokens("llm_total_token"),
		}}}}),
	}
	cases["BudgetAllModelsCallers"] = policyCase{
		reason: "An all-models budget is shared across routes; callers with their own limit are left out of everyone else's rule and get a rule each.",
		spec: withBudgets(
			obj{"tokens": "Output", "limit": 5000, "per": "Month", "scope": "AllModels", "callers": []any{obj{"name": "batch", "limit": 90000}, obj{"name": "ci", "limit": 10}}},
			obj{"tokens": "Input", "limit": 600, "per": "Minute"},
		),
		client: ctp("50Mi"),
		backnd: defaults(&egv1a1.RateLimitSpec{Global: &egv1a1.GlobalRateLimit{Rules: []egv1a1.RateLimitRule{{
			ClientSelectors: selects(perCaller, caller("batch", true), caller("ci", true)),
			Limit:           egv1a1.RateLimitValue{Requests: 5000, Unit: egv1a1.RateLimitUnitMonth},
			Cost:            tokens("llm_output_token"),
			Shared:          new(true),
		}, {
			ClientSelectors: selects(caller("batch", false)),
			Limit:           egv1a1.RateLimitValue{Requests: 90000, Unit: egv1a1.RateLimitUnitMonth},
			Cost:            tokens("llm_output_token"),
			Shared:          new(true),
		}, {
			ClientSelectors: selects(caller("ci", false)),
			Limit:           egv1a1.RateLimitValue{Requests: 10, Unit: egv1a1.RateLimitUnitMonth},
			Cost:            tokens("llm_output_token"),
			Shared:          new(true),
		}, {
			ClientSelectors: selects(perCaller),
			Limit:           egv1a1.RateLimitValue{Requests: 600, Unit: egv1a1.RateLimitUnitMinute},
			Cost:            tokens("llm_input_token"),
		}}}}),
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, newRequest(t, gatewayXR(tc.spec), nil, nil))
			if diff := cmp.Diff(tc.client, typedManifest[egv1a1.ClientTrafficPolicySpec](t, manifest(rsp, "client-policy"))); diff != "" {
				t.Errorf("%s\nClientTrafficPolicy spec: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.backnd, typedManifest[egv1a1.BackendTrafficPolicySpec](t, manifest(rsp, "failover-policy"))); diff != "" {
				t.Errorf("%s\nBackendTrafficPolicy spec: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestGatewayNamespace(t *testing.T) {
	rsp := run(t, newRequest(t, gatewayXR(nil), nil, nil))
	got := rsp.GetDesired().GetResources()["gateway-namespace"].GetResource().AsMap()["spec"].(obj)
	want := obj{
		// Created and updated, never deleted: other things may live there.
		"managementPolicies": []any{"Observe", "Create", "Update"},
		"forProvider":        obj{"manifest": obj{"apiVersion": "v1", "kind": "Namespace", "metadata": obj{"name": "modelplane-system"}}},
		"providerConfigRef":  obj{"kind": "ClusterProviderConfig", "name": "gpu-cluster-1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("gateway-namespace Object spec: -want, +got:\n%s", diff)
	}
}
