package v1alpha1

import (
	"strings"

	"github.com/crossplane/function-sdk-go/errors"
)

// Token budgets: the types under an InferenceGateway's spec.budgets, and
// their checks. internal/gateway composes them into the gateway's
// BackendTrafficPolicy as Envoy Gateway global rate limits keyed on the
// authenticated caller.

// The token kinds a budget counts (spec.budgets[].tokens).
const (
	BudgetTokensInput  = "Input"
	BudgetTokensOutput = "Output"
	BudgetTokensTotal  = "Total"
)

// The windows a budget is spent over (spec.budgets[].per). Envoy Gateway
// v1.8.3 also has Second and Year (api/v1alpha1/ratelimit_types.go,
// RateLimitUnit); a token budget per second is a rate limit, not a budget,
// and a year outlives any Redis the counters are kept in.
const (
	BudgetPerMinute = "Minute"
	BudgetPerHour   = "Hour"
	BudgetPerDay    = "Day"
	BudgetPerMonth  = "Month"
)

// The scopes of a budget (spec.budgets[].scope).
const (
	// BudgetScopePerModel gives each caller one budget per model: Envoy
	// Gateway gives each route of a Gateway-targeted policy its own
	// counters (gateway v1.8.3 api/v1alpha1/ratelimit_types.go,
	// RateLimitRule.ClientSelectors).
	BudgetScopePerModel = "PerModel"
	// BudgetScopeAllModels gives each caller one budget across every
	// model: the rule is shared across the policy's routes
	// (RateLimitRule.Shared).
	BudgetScopeAllModels = "AllModels"
)

// DefaultBudgetScope is spec.budgets[].scope when unset.
const DefaultBudgetScope = BudgetScopePerModel

// Bounds of spec.budgets.
const (
	// MaxBudgets is the most budgets spec.budgets may list (its
	// +kubebuilder:validation:MaxItems).
	MaxBudgets = 8
	// MaxBudgetCallers is the most callers one budget may give their own
	// limit (spec.budgets[].callers' +kubebuilder:validation:MaxItems).
	// Each budget becomes one rule for everyone else and one per such
	// caller, and Envoy Gateway allows 256 rules in a policy
	// (GlobalRateLimit.Rules' MaxItems): 8 budgets of 1+31 rules fit.
	// The default rule also matches the header once plus once per such
	// caller, within RateLimitSelectCondition.Headers' MaxItems of 64.
	MaxBudgetCallers = 31
	// MaxBudgetLimit is the most tokens a limit may be: Envoy Gateway's
	// RateLimitValue.Requests is a uint32.
	MaxBudgetLimit int64 = 4294967295
)

// Budget caps the tokens each authenticated caller may spend in a window.
type Budget struct {
	// The tokens counted: Input (prompt), Output (completion) or Total, as
	// AI Gateway reports them after each response.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:Enum=Input;Output;Total
	Tokens string `json:"tokens,omitempty"`

	// Tokens each caller may spend per window, 1 to 4294967295.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967295
	Limit int64 `json:"limit,omitempty"`

	// The window: Minute, Hour, Day or Month. Windows are aligned to the
	// Unix epoch, and a Month is 30 days.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:Enum=Minute;Hour;Day;Month
	Per string `json:"per,omitempty"`

	// PerModel gives each caller this budget on every model separately;
	// AllModels one budget across all the gateway's models.
	// +kubebuilder:validation:Enum=PerModel;AllModels
	// +kubebuilder:default=PerModel
	Scope string `json:"scope,omitempty"`

	// Callers with a limit of their own instead of limit; the budget's
	// limit does not apply to them.
	// +kubebuilder:validation:MaxItems=31
	// +listType=map
	// +listMapKey=name
	Callers []CallerBudget `json:"callers,omitempty"`
}

// CallerBudget is one caller's own limit in a budget.
type CallerBudget struct {
	// The caller's client ID: its data key in the callers' Secret.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Name string `json:"name,omitempty"`

	// Tokens this caller may spend per window, 1 to 4294967295.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967295
	Limit int64 `json:"limit,omitempty"`
}

// BudgetScope is the budget's scope or its default.
func (b Budget) BudgetScope() string {
	if b.Scope == "" {
		return DefaultBudgetScope
	}
	return b.Scope
}

// validateBudgets checks spec.budgets.
func (s *InferenceGatewaySpec) validateBudgets() error {
	if len(s.Budgets) == 0 {
		return nil
	}
	// The budgets are kept per caller by the header caller authentication
	// sets: without auth there is no caller to keep them for, and a
	// client could name itself anyone.
	if !s.AuthEnabled() {
		return errors.New("cannot compose InferenceGateway: spec.budgets needs spec.auth, since budgets are kept per authenticated caller; set spec.auth.apiKey.secretSelector, or remove spec.budgets")
	}
	if n := len(s.Budgets); n > MaxBudgets {
		return errors.Errorf("cannot compose InferenceGateway: spec.budgets has %d budgets; list at most %d", n, MaxBudgets)
	}
	for i, b := range s.Budgets {
		switch b.Tokens {
		case BudgetTokensInput, BudgetTokensOutput, BudgetTokensTotal:
		default:
			return errors.Errorf("cannot compose InferenceGateway: spec.budgets[%d].tokens is %q; set Input, Output or Total", i, b.Tokens)
		}
		if b.Limit < 1 || b.Limit > MaxBudgetLimit {
			return errors.Errorf("cannot compose InferenceGateway: spec.budgets[%d].limit is %d; set 1 to %d tokens", i, b.Limit, MaxBudgetLimit)
		}
		switch b.Per {
		case BudgetPerMinute, BudgetPerHour, BudgetPerDay, BudgetPerMonth:
		default:
			return errors.Errorf("cannot compose InferenceGateway: spec.budgets[%d].per is %q; set Minute, Hour, Day or Month", i, b.Per)
		}
		switch b.BudgetScope() {
		case BudgetScopePerModel, BudgetScopeAllModels:
		default:
			return errors.Errorf("cannot compose InferenceGateway: spec.budgets[%d].scope is %q; set PerModel (the default) or AllModels", i, b.Scope)
		}
		if err := validateCallerBudgets(i, b.Callers); err != nil {
			return err
		}
	}
	return nil
}

// validateCallerBudgets checks spec.budgets[i].callers.
func validateCallerBudgets(i int, cs []CallerBudget) error {
	if n := len(cs); n > MaxBudgetCallers {
		return errors.Errorf("cannot compose InferenceGateway: spec.budgets[%d].callers has %d callers; list at most %d", i, n, MaxBudgetCallers)
	}
	seen := make(map[string]bool, len(cs))
	for j, c := range cs {
		if errs := clientIDErrors(c.Name); len(errs) > 0 {
			return errors.Errorf("cannot compose InferenceGateway: spec.budgets[%d].callers[%d].name %q is not a client ID (%s); name a data key of a callers' Secret", i, j, c.Name, strings.Join(errs, "; "))
		}
		// The list is a map keyed by name (+listType=map): the API server
		// refuses a name twice.
		if seen[c.Name] {
			return errors.Errorf("cannot compose InferenceGateway: spec.budgets[%d].callers[%d].name %q is listed twice; give each caller one limit", i, j, c.Name)
		}
		seen[c.Name] = true
		if c.Limit < 1 || c.Limit > MaxBudgetLimit {
			return errors.Errorf("cannot compose InferenceGateway: spec.budgets[%d].callers[%d].limit is %d; set 1 to %d tokens", i, j, c.Limit, MaxBudgetLimit)
		}
	}
	return nil
}
