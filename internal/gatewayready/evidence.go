package gatewayready

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/crossplane/function-sdk-go/errors"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/decode"
	"github.com/modelplaneai/function-inference-gateway/internal/input/v1beta1"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
	"github.com/modelplaneai/function-inference-gateway/internal/rollout"
	"github.com/modelplaneai/function-inference-gateway/internal/upstream"
)

// Gateway is the InferenceGateway whose readiness is judged.
type Gateway struct {
	// In is the function's Input: the gateway's names and namespaces, the
	// ext-proc markers, and whether the provider sanitizes Secrets.
	In *v1beta1.Input
	// Listeners are the listeners composed on the Gateway.
	Listeners []string
	// Resources name the composition resources that hold the evidence.
	Resources Resources
}

// Resources name the composition resources whose observed Objects the
// verdict reads; package gateway composes them.
type Resources struct {
	Gateway, AnchorRoute, ClientPolicy, EnvoyDeployment string
	// TrafficPolicy is the BackendTrafficPolicy: failover and the token
	// budgets.
	TrafficPolicy string
	// EnvoyProxy carries the function's own ext-proc marker, as the Envoy
	// Deployment's template does once Envoy Gateway has copied it.
	EnvoyProxy string
	// FilterConfigSecret observes AI Gateway's filter-config Secret.
	FilterConfigSecret string
	// CallerAuth is the caller-auth SecurityPolicy.
	CallerAuth string
}

// Evidence is what the observed composed resources show, with what the
// checks of the Secret-fed features (TLS, the client certificate, caller
// authentication) found; Judge gathers it.
type Evidence struct {
	// Address is the Gateway's address; empty until it has one.
	Address string
	// ListenersProgrammed: every listener of the Gateway is Programmed
	// with its references resolved.
	ListenersProgrammed bool
	// AnchorAccepted: AI Gateway accepted the anchor route.
	AnchorAccepted bool
	// ClientPolicyAccepted and CallerPolicyAccepted: Envoy Gateway
	// accepted the ClientTrafficPolicy and the caller-auth SecurityPolicy
	// for the Gateway.
	ClientPolicyAccepted, CallerPolicyAccepted bool
	// TrafficPolicyAccepted: Envoy Gateway accepted the
	// BackendTrafficPolicy for the Gateway.
	TrafficPolicyAccepted bool
	// AuthWarnings name caller Secrets Envoy Gateway cannot use and
	// client IDs in two Secrets; never a key.
	AuthWarnings []string
	// BudgetWarnings name caller limits of spec.budgets that apply to no
	// request.
	BudgetWarnings []string
	// Deployment is the live Envoy Deployment; nil until observed.
	Deployment *appsv1.Deployment
	// Rollout is the rollout rule's verdict on the Deployment.
	Rollout rollout.Verdict
	// filterConfig is what the function saw of AI Gateway's filter-config
	// Secret.
	filterConfig filterConfigEvidence
	// Marker is what the function does with its own ext-proc marker.
	Marker Marker
	// Problems are the failed checks, in the order of the conditions
	// table: the first is GatewayReady's reason.
	Problems compose.Problems
	// Notices are Normal results: what is on its way without holding
	// readiness.
	Notices []string
	// ClientCertWarnings say the client certificate cannot be renewed.
	ClientCertWarnings []string
}

// FilterConfigSeen reports whether the function observes AI Gateway's
// filter-config Secret and has seen it exist.
func (e *Evidence) FilterConfigSeen() bool { return e.filterConfig.seen }

// filterConfigEvidence is what the function knows of AI Gateway's
// filter-config Secret, the evidence for its own ext-proc marker.
type filterConfigEvidence struct {
	name, namespace string
	// observed: the function observes the Secret (the Input says the
	// provider sanitizes Secrets); seen: the Secret exists.
	observed, seen bool
}

// observeFilterConfig reads whether AI Gateway's filter-config Secret
// exists. An observe-only Object whose remote object does not exist is not
// Synced (crossplane-runtime v2.4.0 pkg/reconciler/managed/reconciler.go
// refuses to observe-only a resource that does not exist), so only a live
// Object counts.
func (g Gateway) observeFilterConfig(e *Evidence, obs map[string]remote.Observed) {
	e.filterConfig = filterConfigEvidence{
		name:      names.FilterConfigSecret(g.In.GatewayNamespace, g.In.GatewayName),
		namespace: g.In.EnvoyGatewayNamespace,
		observed:  g.In.ProviderSanitizesSecrets,
	}
	o, ok := obs[g.Resources.FilterConfigSecret]
	e.filterConfig.seen = e.filterConfig.observed && ok && o.Live()
}

// observeGateway requires an address on the Gateway, and every listener
// programmed.
func (g Gateway) observeGateway(e *Evidence, obs map[string]remote.Observed) error {
	gw, ok := obs[g.Resources.Gateway]
	if !ok || !gw.Live() {
		e.Problems.Add(ReasonNotProgrammed, fmt.Sprintf("the Gateway %q in %q has not been observed on the gateway cluster yet%s", g.In.GatewayName, g.In.GatewayNamespace, remote.SyncNote(gw, ok)))
		return nil
	}
	st, err := upstream.GatewayStatus(gw.LiveAt("status"))
	if err != nil {
		return errors.Wrapf(err, "cannot read the observed Gateway %q", g.In.GatewayName)
	}
	e.Address = upstream.GatewayAddress(st)
	if e.Address == "" {
		e.Problems.Add(ReasonNotProgrammed, fmt.Sprintf("the Gateway %q in %q has no address yet; Envoy Gateway sets status.addresses once it has programmed it", g.In.GatewayName, g.In.GatewayNamespace))
	}
	g.observeListeners(e, gw.LiveGeneration(), st)
	return nil
}

// observeListeners requires every listener the function composes on the
// Gateway to be Programmed with its references resolved, as Envoy Gateway
// last judged the Gateway's current generation. An address alone says
// nothing about the listeners: with a certificate or key that does not
// parse, or a certificate that has expired, Envoy Gateway sets the https
// listener ResolvedRefs=False, InvalidCertificateRef, and Programmed=False,
// Invalid, while the Gateway keeps its address, and leaves the listener out
// of Envoy's configuration (gateway v1.8.3 internal/gatewayapi/validate.go,
// validateTerminateModeAndGetTLSSecrets and validateListenerConditions;
// internal/gatewayapi/tls.go, parseCertsFromTLSSecretsData and
// filterValidCertificates; internal/gatewayapi/listener.go,
// ProcessListeners). A key that is not the certificate's it does not
// notice; the function does (package gateway, keyMismatch). A listener
// Envoy Gateway has not reported, or reported for an older generation,
// counts as not programmed. gen is the Gateway's metadata.generation, st
// its decoded status.
func (g Gateway) observeListeners(e *Evidence, gen int64, st *gwapiv1.GatewayStatus) {
	var bad []string
	for _, l := range g.Listeners {
		conds, reported := upstream.ListenerConditions(st, l)
		if !reported {
			bad = append(bad, fmt.Sprintf("Envoy Gateway has not reported the listener %q yet", l))
			continue
		}
		for _, t := range []gwapiv1.ListenerConditionType{gwapiv1.ListenerConditionProgrammed, gwapiv1.ListenerConditionResolvedRefs} {
			c := meta.FindStatusCondition(conds, string(t))
			switch {
			case c == nil:
				bad = append(bad, fmt.Sprintf("Envoy Gateway has not reported %s for the listener %q yet", t, l))
			case gen > 0 && c.ObservedGeneration < gen:
				bad = append(bad, fmt.Sprintf("the listener %q's %s is for generation %d of the Gateway, not %d: Envoy Gateway has not judged the change yet", l, t, c.ObservedGeneration, gen))
			case !upstream.IsTrue(c):
				bad = append(bad, upstream.WithMessage(fmt.Sprintf("the listener %q is %s=%s (%s)", l, t, c.Status, c.Reason), c))
			}
		}
	}
	e.ListenersProgrammed = len(bad) == 0
	if !e.ListenersProgrammed {
		e.Problems.Add(ReasonListenersNotProgrammed, fmt.Sprintf("the Gateway %q does not serve on every listener: %s", g.In.GatewayName, strings.Join(bad, "; ")))
	}
}

// observeAnchor requires AI Gateway to have accepted the anchor route.
func (g Gateway) observeAnchor(e *Evidence, obs map[string]remote.Observed) error {
	anchor := names.AnchorRoute(g.In.GatewayName)
	ar, ok := obs[g.Resources.AnchorRoute]
	if !ok || !ar.Live() {
		e.Problems.Add(ReasonAnchorNotAccepted, fmt.Sprintf("the anchor AIGatewayRoute %q has not been observed yet%s", anchor, remote.SyncNote(ar, ok)))
		return nil
	}
	c, err := upstream.RouteAccepted(ar.LiveAt("status"))
	if err != nil {
		return errors.Wrapf(err, "cannot read the observed anchor AIGatewayRoute %q", anchor)
	}
	e.AnchorAccepted = upstream.IsTrue(c)
	if !e.AnchorAccepted {
		e.Problems.Add(ReasonAnchorNotAccepted, upstream.WithMessage(fmt.Sprintf("AI Gateway has not accepted the anchor AIGatewayRoute %q yet", anchor), c))
	}
	return nil
}

// observeClientPolicy requires Envoy Gateway to have accepted the
// ClientTrafficPolicy for this Gateway. Until it has, the listener keeps
// its 32 KiB buffer and long prompts fail while the gateway looks ready.
func (g Gateway) observeClientPolicy(e *Evidence, obs map[string]remote.Observed) error {
	var err error
	e.ClientPolicyAccepted, err = g.policyAccepted(e, obs, g.Resources.ClientPolicy, ReasonClientPolicyNotAccepted,
		"ClientTrafficPolicy", names.ClientPolicy(g.In.GatewayName), " yet; until it does, request and response bodies over 32 KiB fail")
	return err
}

// observeTrafficPolicy requires Envoy Gateway to have accepted the
// BackendTrafficPolicy for this Gateway. Envoy Gateway refuses the whole
// policy when any part of it fails to translate, global rate limits
// without a rate-limit backend among them, and then answers 500 on every
// route the policy covers instead of routing it: every route of the
// Gateway, the front door's /healthz included (gateway v1.8.3
// internal/gatewayapi/backendtrafficpolicy.go,
// translateBackendTrafficPolicyForGateway and buildGlobalRateLimit).
// The message quotes Envoy Gateway's.
func (g Gateway) observeTrafficPolicy(e *Evidence, obs map[string]remote.Observed) error {
	var err error
	e.TrafficPolicyAccepted, err = g.policyAccepted(e, obs, g.Resources.TrafficPolicy, ReasonTrafficPolicyNotAccepted,
		"BackendTrafficPolicy", names.FailoverPolicy(g.In.GatewayName), "; while it is refused, Envoy answers 500 on every route of the Gateway, /healthz included")
	return err
}

// policyAccepted reports whether Envoy Gateway has accepted, for this
// Gateway, the live policy observed under resource, and otherwise adds a
// problem with reason that names the policy (what, name) and says what its
// absence costs (consequence, after "for the Gateway ...").
func (g Gateway) policyAccepted(e *Evidence, obs map[string]remote.Observed, resource, reason, what, name, consequence string) (bool, error) {
	o, ok := obs[resource]
	if !ok || !o.Live() {
		e.Problems.Add(reason, fmt.Sprintf("the %s %q has not been observed yet%s", what, name, remote.SyncNote(o, ok)))
		return false, nil
	}
	c, err := upstream.PolicyAccepted(o.LiveAt("status"), g.In.GatewayNamespace, g.In.GatewayName)
	if err != nil {
		return false, errors.Wrapf(err, "cannot read the observed %s %q", what, name)
	}
	if !upstream.IsTrue(c) {
		e.Problems.Add(reason, upstream.WithMessage(fmt.Sprintf("Envoy Gateway has not accepted the %s %q for the Gateway %q%s", what, name, g.In.GatewayName, consequence), c))
		return false, nil
	}
	return true, nil
}

// observeDeployment evaluates the rollout rule on the live Envoy
// Deployment, and plans the function's own marker on what it shows, whose
// value composed before is carried, and whose settle time counts from the
// first sight recorded in rec. It runs after observeAnchor and
// observeFilterConfig, whose evidence the plan needs.
func (g Gateway) observeDeployment(e *Evidence, obs map[string]remote.Observed, rule *rollout.Rule, rec *v1alpha1.MarkerStatus, now time.Time) error {
	dn := names.EnvoyDeployment(g.In.GatewayNamespace, g.In.GatewayName)
	dep, ok := obs[g.Resources.EnvoyDeployment]
	carried := g.carriedMarker(obs)
	if !ok || !dep.Live() {
		e.Marker = planMarker(e, carried, rec, now)
		e.Problems.Add(ReasonDeploymentNotObserved, fmt.Sprintf("the Envoy Deployment %q in %q has not been observed%s", dn, g.In.EnvoyGatewayNamespace, remote.SyncNote(dep, ok)))
		return nil
	}
	d := &appsv1.Deployment{}
	if err := decode.Into(fmt.Sprintf("the observed Envoy Deployment %q", dn), "", dep.LiveAt(), d); err != nil {
		return err
	}
	e.Deployment = d
	v, err := rule.Evaluate(dep.Manifest())
	if err != nil {
		return err
	}
	e.Rollout = v
	e.Marker = planMarker(e, carried, rec, now)
	for _, c := range v.Failed {
		msg := rolloutMessage(c, d)
		if c == rollout.ExtProcMarkerMissing {
			msg = g.markerMessage(e.Marker, g.In.ExtProcMarkerAnnotations)
		}
		e.Problems.Add(string(c), msg)
	}
	return nil
}

// condition is GatewayReady: the first failed check as the reason, and
// every failed check in the message. d names the Envoy Deployment; auth:
// the gateway authenticates callers.
func (e *Evidence) condition(d string, auth bool) compose.Condition {
	msg := ""
	if e.Problems.None() {
		st := e.Deployment.Status
		accepted := "anchor route, client and traffic policies accepted"
		if auth {
			accepted = "anchor route, client and traffic policies and caller auth accepted"
		}
		msg = fmt.Sprintf("Gateway has address %s and every listener programmed; %s; Envoy Deployment %q rolled out with the ext-proc marker: %d of %d replicas run the current template, %d available",
			e.Address, accepted, d, st.UpdatedReplicas, st.Replicas, st.AvailableReplicas)
		if len(e.AuthWarnings) > 0 {
			msg += ". Caller auth: " + strings.Join(e.AuthWarnings, "; ")
		}
		if len(e.BudgetWarnings) > 0 {
			msg += ". Budgets: " + strings.Join(e.BudgetWarnings, "; ")
		}
	}
	return e.Problems.Condition(ConditionType, ReasonReady, msg)
}

// rolloutMessage says why a clause of the rollout rule fails; the
// ExtProcMarkerMissing message is markerMessage's.
func rolloutMessage(c rollout.Check, d *appsv1.Deployment) string {
	st := d.Status
	switch c {
	case rollout.GenerationNotObserved:
		return fmt.Sprintf("the Deployment controller has not observed generation %d of the Envoy Deployment yet (observedGeneration %d)", d.Generation, st.ObservedGeneration)
	case rollout.OldReplicasPresent:
		return fmt.Sprintf("%d of %d replicas run the current template; old-template pods may lack the ext-proc sidecar", st.UpdatedReplicas, st.Replicas)
	case rollout.NoReplicaAvailable:
		return fmt.Sprintf("%d of %d replicas are available", st.AvailableReplicas, st.Replicas)
	case rollout.ExtProcMarkerMissing:
		// markerMessage says why, from what the function knows of the
		// marker.
	}
	return string(c)
}
