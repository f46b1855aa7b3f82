package route

import (
	"fmt"
	"slices"
	"strings"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/crossplane/function-sdk-go/errors"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
	"github.com/modelplaneai/function-inference-gateway/internal/upstream"
)

// Which callers may use the model (spec.access). The gateway's caller
// authentication sets x-modelplane-caller to the client ID of every caller
// whose key it accepts, replacing whatever the caller sent (envoy
// source/extensions/filters/http/api_key_auth/api_key_auth.cc,
// ApiKeyAuthFilter::decodeHeaders). A SecurityPolicy on the HTTPRoute AI
// Gateway generates for the model then lets through only the listed client
// IDs: Envoy Gateway puts its authorization into Envoy's RBAC filter, per
// route, which runs after api_key_auth in the same request (gateway v1.8.3
// internal/xds/translator/httpfilters.go, newOrderedHTTPFilter), and
// answers 403 to the others. RBAC reads the config of the route the
// request ends on: the model's, since AI Gateway's ext_proc, before it,
// sets the model header and clears the route cache (ai-gateway v1.0.0
// internal/extproc/processor_impl.go). With mergeType the route's policy
// is merged into the Gateway's caller-auth policy rather than replacing it
// on the route, so the API key is still checked (401 without one).

// accessRule names the one authorization rule of the access policy.
const accessRule = "spec-access-callers"

// accessPolicy is the SecurityPolicy that restricts the model to
// spec.access.callers. It targets the HTTPRoute AI Gateway generates under
// the AIGatewayRoute's name and namespace (ai-gateway v1.0.0
// internal/controller/ai_gateway_route.go, newHTTPRoute), every rule of it
// (the model's, and AI Gateway's route-not-found). With mergeType Envoy
// Gateway merges it into the policy of the route's Gateway or listener
// and applies the result to the route (gateway v1.8.3
// internal/gatewayapi/securitypolicy.go, processSecurityPolicyForRoute and
// mergeSecurityPolicy); without, a route's policy replaces the Gateway's
// on that route (translateSecurityPolicyForGateway skips a route that has
// its own), and the API key would go unchecked. A header rule matches a
// value exactly, case-sensitively, any of its values
// (internal/xds/translator/authorization.go, buildHeadersPredicate). The
// callers are sorted, so that a reordered list changes nothing. Watched,
// and Ready only for the generation Envoy Gateway judged, as the gateway's
// caller-auth policy.
func (b builder) accessPolicy() *remote.Object {
	return b.wrap(&remote.Manifest[egv1a1.SecurityPolicySpec]{
		APIVersion: upstream.EnvoyGatewayAPIVersion,
		Kind:       "SecurityPolicy",
		Metadata:   b.meta(names.AccessPolicy(b.name)),
		Spec: &egv1a1.SecurityPolicySpec{
			PolicyTargetReferences: egv1a1.PolicyTargetReferences{TargetRefs: []gwapiv1.LocalPolicyTargetReferenceWithSectionName{{
				LocalPolicyTargetReference: gwapiv1.LocalPolicyTargetReference{Group: upstream.GatewayAPIGroup, Kind: "HTTPRoute", Name: gwapiv1.ObjectName(b.name)},
			}}},
			MergeType: ptr.To(egv1a1.StrategicMerge),
			Authorization: &egv1a1.Authorization{
				DefaultAction: ptr.To(egv1a1.AuthorizationActionDeny),
				Rules: []egv1a1.AuthorizationRule{{
					Name:   new(accessRule),
					Action: egv1a1.AuthorizationActionAllow,
					Principal: egv1a1.Principal{Headers: []egv1a1.AuthorizationHeaderMatch{{
						Name: names.CallerHeader, Values: slices.Sorted(slices.Values(b.spec.Access.Callers)),
					}}},
				}},
			},
		},
	}, remote.ReadyWhen(upstream.CELPolicyAcceptedNow), remote.Watch())
}

// composeAccess adds the access SecurityPolicy of a route with
// spec.access, Ready once enforced (accessEnforced).
func (b builder) composeAccess(res *compose.Result, enforced bool) {
	if b.spec.Access != nil {
		res.Resources[ResourceAccess] = compose.Desired{Object: b.accessPolicy(), Ready: enforced}
	}
}

// accessRefusal says why the route's spec.access cannot be enforced on
// the gateway named name (gw), with the reason, or "" when it can or the
// route has none. Only a gateway that reports caller authentication sets
// the caller header the policy matches; on any other no caller carries it,
// and the policy, applied alone, would deny everyone.
func accessRefusal(spec *v1alpha1.ModelRouteSpec, name string, gw *gateway.RouteView) (reason, why string) {
	switch {
	case spec.Access == nil || gw == nil || gw.AuthMethod == v1alpha1.AuthMethodAPIKey:
		return "", ""
	case gw.AuthMethod == "":
		return ReasonWaitingForGateway, fmt.Sprintf("the InferenceGateway %q has not reported its caller authentication (status.auth) yet, which spec.access needs; nothing new is composed until it does", name)
	}
	return ReasonAccessNotEnforceable, fmt.Sprintf("spec.access cannot be enforced: the InferenceGateway %q does not authenticate callers (status.auth.method: %s), so no request names its caller; "+
		"set spec.auth.apiKey on the InferenceGateway, or remove spec.access to serve every caller; nothing new is composed meanwhile, and what was composed is kept", name, gw.AuthMethod)
}

// unknownCallers warns of each client ID in spec.access.callers that no
// caller Secret of the gateway holds (status.auth.clientIDs): no request
// carries it, so that caller, if it exists under another name, is refused.
// The policy keeps it, so a caller added to a Secret later is let in
// without a change here.
func unknownCallers(spec *v1alpha1.ModelRouteSpec, name string, gw *gateway.RouteView) []string {
	if spec.Access == nil || gw == nil || gw.AuthMethod != v1alpha1.AuthMethodAPIKey {
		return nil
	}
	known := "none"
	if len(gw.ClientIDs) > 0 {
		known = strings.Join(gw.ClientIDs, ", ")
	}
	var out []string
	for i, id := range spec.Access.Callers {
		if !slices.Contains(gw.ClientIDs, id) {
			out = append(out, fmt.Sprintf("spec.access.callers[%d] %q is no client ID of the InferenceGateway %q's caller Secrets (status.auth.clientIDs: %s), so no request is let in under it; the other callers listed are; use a client ID, a data key of one of those Secrets",
				i, id, name, known))
		}
	}
	return out
}

// accessEnforced reads whether Envoy Gateway enforces the observed access
// policy on the listener the route is composed on (gw), merged with the
// Gateway's caller-auth policy, for the policy's current generation, and
// adds why not to p. A route without spec.access has nothing to enforce.
//
// Envoy Gateway writes Accepted, and with mergeType Merged, for each
// listener of the route's Gateway (gateway v1.8.3
// internal/gatewayapi/securitypolicy.go, processSecurityPolicyForRoute).
// A policy it refuses, or cannot merge, it leaves out of the route, so the
// Gateway's policy alone applies there: every authenticated caller gets
// the model. A policy it applies without merging (no Merged: it found no
// policy on the Gateway) checks no key, and denies every caller.
func accessEnforced(req compose.Request, p *compose.Problems, spec *v1alpha1.ModelRouteSpec, name string, gw *gateway.RouteView) (bool, error) {
	if spec.Access == nil {
		return true, nil
	}
	policy := names.AccessPolicy(name)
	o, ok := req.Observed[ResourceAccess]
	if !ok || !o.Live() {
		p.Add(ReasonWaitingForAccessPolicy, fmt.Sprintf("the SecurityPolicy %q that restricts the model to spec.access.callers has not been observed on the gateway cluster yet", policy))
		return false, nil
	}
	in := req.Input
	conds, _, err := upstream.PolicyAncestorConditions(o.LiveAt("status"), in.GatewayNamespace, in.GatewayName, judgedListener(gw))
	if err != nil {
		return false, errors.Wrap(err, "cannot read the observed access SecurityPolicy")
	}
	accepted := meta.FindStatusCondition(conds, string(gwapiv1.PolicyConditionAccepted))
	merged := meta.FindStatusCondition(conds, string(egv1a1.PolicyConditionMerged))
	switch {
	case accepted == nil || accepted.ObservedGeneration < o.LiveGeneration():
		p.Add(ReasonWaitingForAccessPolicy, fmt.Sprintf("Envoy Gateway has not judged the SecurityPolicy %q for the Gateway %q yet; until it applies it, spec.access.callers is not enforced", policy, in.GatewayName))
	case !upstream.IsTrue(accepted):
		p.Add(ReasonAccessPolicyNotAccepted, fmt.Sprintf("Envoy Gateway refuses the SecurityPolicy %q (Accepted=False, %s: %s), and applies the gateway's caller authentication alone: every authenticated caller may call the model, not only spec.access.callers",
			policy, accepted.Reason, accepted.Message))
	case merged == nil:
		p.Add(ReasonAccessPolicyNotAccepted, fmt.Sprintf("Envoy Gateway applies the SecurityPolicy %q without merging it into the Gateway %q's caller-auth policy (no Merged condition), so no key is checked on the model and every caller is refused", policy, in.GatewayName))
	case !upstream.IsTrue(merged):
		p.Add(ReasonAccessPolicyNotAccepted, fmt.Sprintf("Envoy Gateway did not merge the SecurityPolicy %q into the Gateway %q's caller-auth policy (Merged=False, %s: %s), and applies the gateway's caller authentication alone: every authenticated caller may call the model, not only spec.access.callers",
			policy, in.GatewayName, merged.Reason, merged.Message))
	default:
		return true, nil
	}
	return false, nil
}
