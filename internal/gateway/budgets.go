package gateway

import (
	"fmt"
	"strings"

	aigv1b1 "github.com/envoyproxy/ai-gateway/api/v1beta1"
	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
)

// Token budgets (spec.budgets) as Envoy Gateway global rate limits in the
// gateway's BackendTrafficPolicy (failoverPolicy), keyed on the caller.
//
// The caller is names.CallerHeader: caller authentication's api_key_auth
// sets it to the authenticated client ID (auth.go, ForwardClientIDHeader),
// and the ClientTrafficPolicy removes a client-sent copy before any filter
// runs (clientPolicy), so a client cannot spend another's budget. Budgets
// need spec.auth (v1alpha1 validateBudgets). Envoy Gateway v1.8.3 places
// the rate-limit filter after the authentication filters
// (internal/xds/translator/httpfilters.go, newOrderedHTTPFilter), so the
// header is set by the time the rate-limit actions read it.
//
// Tokens are known only once the response is done: AI Gateway writes them
// into its dynamic metadata under the keys the ModelRoute's
// llmRequestCosts name (names.InputTokensKey and the others). So each rule
// costs 0 on the request, which only checks that the caller's counter is
// not over its limit (envoyproxy/ratelimit, the pseudo-version Envoy
// Gateway v1.8.3 pins, src/utils/utilities.go, GetHitsAddends: a zero
// per-descriptor hits_addend checks without adding), and the tokens on
// the response: Envoy Gateway turns a response cost into a second rate
// limit with apply_on_stream_done and the metadata as hits_addend
// (internal/xds/translator/ratelimit.go, buildRouteRateLimits). The
// request that crosses the budget therefore still succeeds.

// budgetTokenKeys maps a budget's token kind to the metadata key AI
// Gateway writes its count under.
var budgetTokenKeys = map[string]string{
	v1alpha1.BudgetTokensInput:  names.InputTokensKey,
	v1alpha1.BudgetTokensOutput: names.OutputTokensKey,
	v1alpha1.BudgetTokensTotal:  names.TotalTokensKey,
}

// rateLimit is spec.budgets as global rate-limit rules; nil without
// budgets, which leaves the policy as it was before budgets existed.
//
// Each budget is one rule for every caller without a limit of its own,
// and one rule per caller with one. The first selects the header as
// Distinct, a counter per client ID, and excludes each caller with its
// own limit by an inverted Exact match on the same header: a rule's
// header matches are ANDed (gateway v1.8.3 api/v1alpha1/ratelimit_types.go,
// RateLimitSelectCondition.Headers), and a HeaderValueMatch action whose
// expect_match fails produces no descriptor, so the rule does not apply to
// that caller (internal/xds/translator/ratelimit.go,
// buildHeaderMatchRateLimitActions). Distinct itself cannot be inverted
// (internal/gatewayapi/backendtrafficpolicy.go, buildRateLimitRule).
//
// PerModel leaves the rule unshared: a Gateway-targeted policy gives each
// route, one per model, its own counters (ratelimit_types.go,
// RateLimitRule.ClientSelectors). AllModels shares it across every route
// (RateLimitRule.Shared).
func (b builder) rateLimit() *egv1a1.RateLimitSpec {
	if len(b.spec.Budgets) == 0 {
		return nil
	}
	var rules []egv1a1.RateLimitRule
	for _, bu := range b.spec.Budgets {
		var shared *bool
		if bu.BudgetScope() == v1alpha1.BudgetScopeAllModels {
			shared = new(true)
		}
		cost := budgetCost(budgetTokenKeys[bu.Tokens])
		unit := egv1a1.RateLimitUnit(bu.Per)
		others := []egv1a1.HeaderMatch{{Type: ptr.To(egv1a1.HeaderMatchDistinct), Name: names.CallerHeader}}
		for _, c := range bu.Callers {
			others = append(others, egv1a1.HeaderMatch{Type: ptr.To(egv1a1.HeaderMatchExact), Name: names.CallerHeader, Value: new(c.Name), Invert: new(true)})
		}
		rules = append(rules, budgetRule(others, bu.Limit, unit, cost, shared))
		for _, c := range bu.Callers {
			own := []egv1a1.HeaderMatch{{Type: ptr.To(egv1a1.HeaderMatchExact), Name: names.CallerHeader, Value: new(c.Name)}}
			rules = append(rules, budgetRule(own, c.Limit, unit, cost, shared))
		}
	}
	return &egv1a1.RateLimitSpec{Global: &egv1a1.GlobalRateLimit{Rules: rules}}
}

// budgetRule is one rate-limit rule of a budget.
func budgetRule(headers []egv1a1.HeaderMatch, limit int64, unit egv1a1.RateLimitUnit, cost *egv1a1.RateLimitCost, shared *bool) egv1a1.RateLimitRule {
	return egv1a1.RateLimitRule{
		ClientSelectors: []egv1a1.RateLimitSelectCondition{{Headers: headers}},
		Limit:           egv1a1.RateLimitValue{Requests: uint32(limit), Unit: unit}, //nolint:gosec // Validate keeps it within 1 to MaxBudgetLimit, a uint32
		Cost:            cost,
		Shared:          shared,
	}
}

// budgetCost charges nothing on the request, which only checks the
// counter, and the response's tokens under key once the stream is done.
func budgetCost(key string) *egv1a1.RateLimitCost {
	return &egv1a1.RateLimitCost{
		Request: &egv1a1.RateLimitCostSpecifier{From: egv1a1.RateLimitCostFromNumber, Number: ptr.To[uint64](0)},
		Response: &egv1a1.RateLimitCostSpecifier{
			From:     egv1a1.RateLimitCostFromMetadata,
			Metadata: &egv1a1.RateLimitCostMetadata{Namespace: aigv1b1.AIGatewayFilterMetadataNamespace, Key: key},
		},
	}
}

// unknownBudgetCallers warns of each caller limit in spec.budgets whose
// name no selected caller Secret holds as a client ID. Its rule's Exact
// match on the caller header (rateLimit) never meets that name, since the
// header carries only client IDs caller authentication accepted, and the
// default rule leaves out only the names listed, so a misspelt name keeps
// that caller on the budget's default limit with nothing to say so but
// this. Nothing is said before Crossplane has fetched the Secrets, or when
// none is selected (the caller-auth problems say that).
func (b builder) unknownBudgetCallers(c callers) []string {
	if !c.resolved || len(c.selected) == 0 {
		return nil
	}
	var notes []string
	for i, bu := range b.spec.Budgets {
		for j, cb := range bu.Callers {
			if !c.holds(cb.Name) {
				// c.selected is sorted by name (readCallers).
				notes = append(notes, fmt.Sprintf("spec.budgets[%d].callers[%d].name %q is no client ID in the caller Secrets spec.auth.apiKey.secretSelector selects (%s), so its limit applies to no request and that caller, if it exists under another name, is held to the budget's default limit; use a client ID, a key of one of those Secrets",
					i, j, cb.Name, strings.Join(c.names(), ", ")))
			}
		}
	}
	return notes
}
