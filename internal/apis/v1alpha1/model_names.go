package v1alpha1

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Model names belong to namespaces. A model name of the form
// <namespace>/<rest>, whose first segment is a DNS label, is in that
// namespace's space: only a ModelRoute in that namespace may serve it, and
// the default model name, <namespace>/<name>, is always there. Any other
// name, such as gpt-4o or Qwen/Qwen3-8B (whose first segment is not a DNS
// label), is outside every namespace's space: only a ModelRoute in a
// namespace that its InferenceGateway lists in
// spec.modelNames.unprefixedNamespaces may serve it. The rule is judged
// from the route and its gateway alone, so the function can keep it on
// every reconcile; which of two granted namespaces serves a name both
// claim is Gateway API's rule for two routes with the same match (the
// older route wins).

// AnyNamespace in spec.modelNames.unprefixedNamespaces grants every
// namespace.
const AnyNamespace = "*"

// MaxUnprefixedNamespaces is how many namespaces a gateway may grant.
const MaxUnprefixedNamespaces = 256

// modelName is a model name callers can send and Envoy can match: printable
// ASCII, without control characters (a CR or LF would end the header AI
// Gateway matches the model on) and without leading or trailing spaces,
// which HTTP strips from a header value, so the route would never match.
var modelName = regexp.MustCompile(`^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$`)

// ModelNames says which namespaces' ModelRoutes may serve model names
// outside every namespace's space.
type ModelNames struct {
	// Namespaces whose ModelRoutes may serve a model name that starts with
	// no namespace, such as gpt-4o or Qwen/Qwen3-8B; "*" grants every
	// namespace. A name of the form <namespace>/... belongs to that
	// namespace alone, whatever this says.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$`
	// +listType=set
	UnprefixedNamespaces []string `json:"unprefixedNamespaces,omitempty"`
}

// ModelNamespace returns the namespace whose space model is in, and false
// when it is in none.
func ModelNamespace(model string) (string, bool) {
	first, _, found := strings.Cut(model, "/")
	if !found || len(validation.IsDNS1123Label(first)) > 0 {
		return "", false
	}
	return first, true
}

// ModelRefusal says why a ModelRoute in namespace ns may not serve model
// through the InferenceGateway gateway, whose spec grants unprefixed (its
// spec.modelNames.unprefixedNamespaces), or "" when it may.
func ModelRefusal(model, ns, gateway string, unprefixed []string) string {
	owner, ok := ModelNamespace(model)
	switch {
	case ok && owner == ns:
		return ""
	case ok:
		return fmt.Sprintf("spec.model %q is in the namespace %s's space of model names (%s/...), and a ModelRoute in %s may serve only names that start with %s/ or, if its gateway allows it, names that start with no namespace; name the model %s/<model>, or serve it from a ModelRoute in %s", model, owner, owner, ns, ns, ns, owner)
	case slices.Contains(unprefixed, ns) || slices.Contains(unprefixed, AnyNamespace):
		return ""
	}
	return fmt.Sprintf("spec.model %q starts with no namespace, and the InferenceGateway %q does not let ModelRoutes in %s serve such names; name the model %s/<model>, or have the gateway's owner add %s to its spec.modelNames.unprefixedNamespaces", model, gateway, ns, ns, ns)
}

// validateModelName checks spec.model's characters.
func validateModelName(model string) error {
	if model != "" && !modelName.MatchString(model) {
		return fmt.Errorf("spec.model %q is not a model name callers can send; use printable ASCII without control characters or leading or trailing spaces, such as ml-team/qwen3-8b", model)
	}
	return nil
}

// validate checks spec.modelNames.
func (m *ModelNames) validate() error {
	if m == nil {
		return nil
	}
	if n := len(m.UnprefixedNamespaces); n > MaxUnprefixedNamespaces {
		return fmt.Errorf("spec.modelNames.unprefixedNamespaces lists %d namespaces; list at most %d, or \"*\" for every namespace", n, MaxUnprefixedNamespaces)
	}
	for i, ns := range m.UnprefixedNamespaces {
		if ns != AnyNamespace && len(validation.IsDNS1123Label(ns)) > 0 {
			return fmt.Errorf("spec.modelNames.unprefixedNamespaces[%d] %q is not a namespace name; list namespaces such as ml-platform, or \"*\" for every namespace", i, ns)
		}
		if slices.Contains(m.UnprefixedNamespaces[:i], ns) {
			return fmt.Errorf("spec.modelNames.unprefixedNamespaces[%d] %q is listed twice; list each namespace once", i, ns)
		}
	}
	return nil
}
