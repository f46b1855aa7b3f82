package v1alpha1

import (
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/crossplane/function-sdk-go/errors"
)

// Caller authentication: the types under an InferenceGateway's spec.auth,
// and their checks. internal/gateway composes it.

// AuthMethodAPIKey is the only caller authentication method: API keys.
const AuthMethodAPIKey = "APIKey"

// DefaultAuthMethod is spec.auth.method when unset, the only method.
const DefaultAuthMethod = AuthMethodAPIKey

// MaxSelectorLabels is the most labels a caller Secret selector may have.
const MaxSelectorLabels = 16

// Auth says how callers authenticate.
type Auth struct {
	// How callers authenticate: APIKey, the only method.
	// +kubebuilder:validation:Enum=APIKey
	// +kubebuilder:default=APIKey
	Method string `json:"method,omitempty"`
	// The Secrets that hold the callers' keys.
	// +kubebuilder:validation:Required
	APIKey *APIKeyAuth `json:"apiKey,omitempty"`
}

// APIKeyAuth selects the callers' Secrets.
type APIKeyAuth struct {
	// Selects Secrets in the function Input's objectNamespace on the
	// control plane. Each data entry of a Secret is one caller: the key is
	// the client ID, the value its API key.
	// +kubebuilder:validation:Required
	SecretSelector *SecretSelector `json:"secretSelector,omitempty"`
}

// SecretSelector selects Secrets by label.
type SecretSelector struct {
	// The labels every selected Secret has.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=16
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// clientIDErrors says why id cannot be a client ID, or nothing: a client
// ID is a data key of a callers' Secret, wherever the spec names one
// (spec.budgets[].callers[].name, a ModelRoute's spec.access.callers).
func clientIDErrors(id string) []string { return validation.IsConfigMapKey(id) }

// AuthEnabled reports whether callers must authenticate.
func (s *InferenceGatewaySpec) AuthEnabled() bool { return s.Auth != nil }

func (s *InferenceGatewaySpec) validateAuth() error {
	a := s.Auth
	if a == nil {
		return nil
	}
	if a.Method != "" && a.Method != AuthMethodAPIKey {
		return errors.Errorf("cannot compose InferenceGateway: spec.auth.method %q is not supported; set %q, or remove spec.auth to leave the gateway open", a.Method, AuthMethodAPIKey)
	}
	if a.APIKey == nil || a.APIKey.SecretSelector == nil || len(a.APIKey.SecretSelector.MatchLabels) == 0 {
		return errors.New("cannot compose InferenceGateway: spec.auth.apiKey.secretSelector.matchLabels is required with spec.auth; set the labels of the callers' Secrets, such as modelplane.ai/callers: \"true\"")
	}
	ls := a.APIKey.SecretSelector.MatchLabels
	if len(ls) > MaxSelectorLabels {
		return errors.Errorf("cannot compose InferenceGateway: spec.auth.apiKey.secretSelector.matchLabels has %d labels; use at most %d", len(ls), MaxSelectorLabels)
	}
	for _, k := range slices.Sorted(maps.Keys(ls)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return errors.Errorf("cannot compose InferenceGateway: spec.auth.apiKey.secretSelector.matchLabels key %q is not a label key (%s)", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(ls[k]); len(errs) > 0 {
			return errors.Errorf("cannot compose InferenceGateway: spec.auth.apiKey.secretSelector.matchLabels[%q] value %q is not a label value (%s)", k, ls[k], strings.Join(errs, "; "))
		}
	}
	return nil
}
