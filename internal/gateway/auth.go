package gateway

import (
	"slices"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
	"github.com/modelplaneai/function-inference-gateway/internal/upstream"
)

// Caller authentication. The callers' Secrets live on the control plane;
// provider-kubernetes copies each to the gateway cluster, and a
// SecurityPolicy on the Gateway makes Envoy check every request's key
// against them (Envoy Gateway apiKeyAuth, Envoy's api_key_auth filter).
// This file builds the policy (gatewayready judges it); callers.go reads the
// Secrets, chooses those the policy uses and composes their copies.

// Composition resource and requirement names of caller authentication.
const (
	// ResourceCallerAuth is the SecurityPolicy on the Gateway.
	ResourceCallerAuth = "caller-auth"
	// PrefixCallerSecret starts the composition resource name of each
	// caller Secret copied to the gateway cluster; the control-plane
	// Secret's name follows.
	PrefixCallerSecret = "caller-secret-"
	// requireCallerSecrets asks Crossplane for the Secrets that
	// spec.auth.apiKey.secretSelector selects.
	requireCallerSecrets = "caller-secrets"
)

// keyHeaders are where Envoy looks for a caller's key, in order:
// Authorization, which OpenAI SDKs send as "Bearer <key>", and x-api-key,
// which Anthropic SDKs send. Envoy's api_key_auth filter drops a leading
// "Bearer " from a header value and takes the first source that has a key
// (envoy source/extensions/filters/http/api_key_auth/api_key_auth.cc,
// KeySources::Source::getKey); Envoy Gateway makes one key source of
// each header (gateway v1.8.3 internal/xds/translator/api_key_auth.go).
var keyHeaders = []string{"authorization", "x-api-key"}

// callerPolicy makes Envoy check every request's key against the callers'
// Secrets, forward the caller's client ID in x-modelplane-caller and strip
// the key before the request goes upstream (Envoy's api_key_auth
// forwarding: the header is set, replacing whatever the caller sent, and
// hide_credentials removes the key's header). With no Secret to use it
// denies every request: authorization with default action Deny and no rule
// (gateway v1.8.3 api/v1alpha1/authorization_types.go). A route-targeted
// SecurityPolicy overrides this one for that route (gateway v1.8.3
// internal/gatewayapi/securitypolicy.go: a policy on a more specific
// target wins), which is how an open route such as a health check stays
// open.
func (b builder) callerPolicy(use []callerSecret) *remote.Object {
	spec := &egv1a1.SecurityPolicySpec{PolicyTargetReferences: b.gatewayTarget()}
	if len(use) == 0 {
		spec.Authorization = &egv1a1.Authorization{DefaultAction: ptr.To(egv1a1.AuthorizationActionDeny)}
	} else {
		refs := make([]gwapiv1.SecretObjectReference, len(use))
		for i, s := range use {
			refs[i] = gwapiv1.SecretObjectReference{Name: gwapiv1.ObjectName(s.remoteName)}
		}
		spec.APIKeyAuth = &egv1a1.APIKeyAuth{
			CredentialRefs:        refs,
			ExtractFrom:           []*egv1a1.ExtractFrom{{Headers: keyHeaders}},
			ForwardClientIDHeader: new(names.CallerHeader),
			Sanitize:              new(true),
		}
	}
	return b.wrap(&remote.Manifest[egv1a1.SecurityPolicySpec]{
		APIVersion: upstream.EnvoyGatewayAPIVersion,
		Kind:       "SecurityPolicy",
		Metadata:   b.meta(names.CallerPolicy(b.in.GatewayName)),
		Spec:       spec,
		// Watched, and Ready only for the generation it has: every change
		// of the callers changes the policy, and without both the Object
		// would show Envoy Gateway's verdict on the previous generation
		// until the provider's next poll (ten minutes while Ready).
	}, remote.ReadyWhen(upstream.CELPolicyAcceptedNow), remote.Watch())
}

// authStatus reports the method and what is in use.
func (b builder) authStatus(c callers) *v1alpha1.AuthStatus {
	if !b.spec.AuthEnabled() {
		return &v1alpha1.AuthStatus{Method: "None"}
	}
	st := &v1alpha1.AuthStatus{Method: v1alpha1.AuthMethodAPIKey}
	for _, s := range c.inUse() {
		st.Secrets = append(st.Secrets, s.name)
		st.Clients += s.clients
		st.ClientIDs = append(st.ClientIDs, s.ids...)
	}
	// A client ID in two Secrets is one caller (Envoy Gateway takes the
	// first Secret's key: callers.go, checkKeys): listed once. The data
	// keys only, which name callers: ModelRoutes check spec.access
	// against them.
	slices.Sort(st.ClientIDs)
	st.ClientIDs = slices.Compact(st.ClientIDs)
	return st
}

// openNotice is the Normal result of a gateway without caller
// authentication, so that nobody runs one by accident.
func (b builder) openNotice() string {
	return "the gateway is open: spec.auth is not set, so anyone who can reach it can call every model it serves; set spec.auth.apiKey.secretSelector to require an API key"
}
