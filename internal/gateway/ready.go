package gateway

import (
	"fmt"
	"strings"
	"time"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/crossplane/function-sdk-go/errors"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/decode"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
	"github.com/modelplaneai/function-inference-gateway/internal/rollout"
	"github.com/modelplaneai/function-inference-gateway/internal/upstream"
)

// evidence is what the observed composed resources show.
type evidence struct {
	address string
	// listenersProgrammed: every listener of the Gateway is Programmed
	// with its references resolved.
	listenersProgrammed  bool
	anchorAccepted       bool
	clientPolicyAccepted bool
	callerPolicyAccepted bool
	// authWarnings name caller Secrets Envoy Gateway cannot use and
	// client IDs in two Secrets; never a key.
	authWarnings []string
	deployment   *appsv1.Deployment
	rollout      rollout.Verdict
	// filterConfig is what the function saw of AI Gateway's filter-config
	// Secret.
	filterConfig filterConfigEvidence
	// marker is what the function does with its own ext-proc marker.
	marker   ownMarker
	problems compose.Problems
	// notices are Normal results: what is on its way without holding
	// readiness.
	notices []string
	// backendTLS is the EnvoyProxy's client certificate for backends, once
	// there is one to present.
	backendTLS *egv1a1.BackendTLSConfig
	// clientCertWarnings say the client certificate cannot be renewed.
	clientCertWarnings []string
}

// filterConfigEvidence is what the function knows of AI Gateway's
// filter-config Secret, the evidence for its own ext-proc marker.
type filterConfigEvidence struct {
	name, namespace string
	// observed: the function observes the Secret (the Input says the
	// provider sanitizes Secrets); seen: the Secret exists.
	observed, seen bool
}

// observe reads the evidence for GatewayReady from the observed Objects,
// each check adding a problem in the order of the conditions table. It
// trusts only a live manifest: an observe-only Object keeps its old
// manifest and Ready condition after the remote object is gone.
//
// It also decides on the function's own ext-proc marker (marker.go), whose
// value composed before is carried, and whose settle time counts from the
// first sight recorded in rec.
func (b builder) observe(obs map[string]remote.Observed, rule *rollout.Rule, secrets []tlsSecret, cc *clientCert, c callers, rec *v1alpha1.MarkerStatus, now time.Time) (*evidence, error) {
	e := &evidence{}
	b.observeFilterConfig(e, obs)
	b.observeTLS(e, secrets)
	if err := b.observeClientCert(e, obs, cc, now); err != nil {
		return nil, err
	}
	for _, check := range []func(*evidence, map[string]remote.Observed) error{b.observeGateway, b.observeAnchor, b.observeClientPolicy, b.observeCallerAuth(c)} {
		if err := check(e, obs); err != nil {
			return nil, err
		}
	}
	return e, b.observeDeployment(e, obs, rule, rec, now)
}

// observeFilterConfig reads whether AI Gateway's filter-config Secret
// exists. An observe-only Object whose remote object does not exist is not
// Synced (crossplane-runtime v2.4.0 pkg/reconciler/managed/reconciler.go
// refuses to observe-only a resource that does not exist), so only a live
// Object counts.
func (b builder) observeFilterConfig(e *evidence, obs map[string]remote.Observed) {
	e.filterConfig = filterConfigEvidence{
		name:      names.FilterConfigSecret(b.in.GatewayNamespace, b.in.GatewayName),
		namespace: b.in.EnvoyGatewayNamespace,
		observed:  b.in.ProviderSanitizesSecrets,
	}
	o, ok := obs[resourceFilterConfigSecret]
	e.filterConfig.seen = e.filterConfig.observed && ok && o.Live()
}

// observeGateway requires an address on the Gateway, and every listener
// programmed.
func (b builder) observeGateway(e *evidence, obs map[string]remote.Observed) error {
	gw, ok := obs[resourceGateway]
	if !ok || !gw.Live() {
		e.problems.Add(ReasonNotProgrammed, fmt.Sprintf("the Gateway %q in %q has not been observed on the gateway cluster yet%s", b.in.GatewayName, b.in.GatewayNamespace, syncNote(gw, ok)))
		return nil
	}
	st, err := upstream.GatewayStatus(gw.Manifest())
	if err != nil {
		return errors.Wrapf(err, "cannot read the observed Gateway %q", b.in.GatewayName)
	}
	e.address = upstream.GatewayAddress(st)
	if e.address == "" {
		e.problems.Add(ReasonNotProgrammed, fmt.Sprintf("the Gateway %q in %q has no address yet; Envoy Gateway sets status.addresses once it has programmed it", b.in.GatewayName, b.in.GatewayNamespace))
	}
	b.observeListeners(e, upstream.Generation(gw.Manifest()), st)
	return nil
}

// observeListeners requires every listener the function composes on the
// Gateway to be Programmed with its references resolved, as Envoy Gateway
// last judged the Gateway's current generation. An address alone says
// nothing about the listeners: with a certificate or key that does not
// parse, or a certificate that has expired, Envoy Gateway sets the https
// listener ResolvedRefs=False, InvalidCertificateRef, and Programmed=False,
// Invalid, while the Gateway keeps its address, and leaves the listener out
// of Envoy's configuration (gateway v1.8.1 internal/gatewayapi/validate.go,
// validateTerminateModeAndGetTLSSecrets and validateListenerConditions;
// internal/gatewayapi/tls.go, parseCertsFromTLSSecretsData and
// filterValidCertificates; internal/gatewayapi/listener.go,
// ProcessListeners). A key that is not the certificate's it does not
// notice; the function does (keyMismatch). A listener Envoy Gateway has not
// reported, or reported for an older generation, counts as not programmed.
// gen is the Gateway's metadata.generation, st its decoded status.
func (b builder) observeListeners(e *evidence, gen int64, st *gwapiv1.GatewayStatus) {
	var bad []string
	for _, l := range b.listenerNames() {
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
	e.listenersProgrammed = len(bad) == 0
	if !e.listenersProgrammed {
		e.problems.Add(ReasonListenersNotProgrammed, fmt.Sprintf("the Gateway %q does not serve on every listener: %s", b.in.GatewayName, strings.Join(bad, "; ")))
	}
}

// listenerNames are the listeners the function composes on the Gateway:
// http, and https with TLS (gateway).
func (b builder) listenerNames() []string {
	if b.spec.TLSEnabled() {
		return []string{ListenerHTTP, ListenerHTTPS}
	}
	return []string{ListenerHTTP}
}

// observeAnchor requires AI Gateway to have accepted the anchor route.
func (b builder) observeAnchor(e *evidence, obs map[string]remote.Observed) error {
	anchor := names.AnchorRoute(b.in.GatewayName)
	ar, ok := obs[resourceAnchorRoute]
	if !ok || !ar.Live() {
		e.problems.Add(ReasonAnchorNotAccepted, fmt.Sprintf("the anchor AIGatewayRoute %q has not been observed yet%s", anchor, syncNote(ar, ok)))
		return nil
	}
	c, err := upstream.RouteAccepted(ar.Manifest())
	if err != nil {
		return errors.Wrapf(err, "cannot read the observed anchor AIGatewayRoute %q", anchor)
	}
	e.anchorAccepted = upstream.IsTrue(c)
	if !e.anchorAccepted {
		e.problems.Add(ReasonAnchorNotAccepted, upstream.WithMessage(fmt.Sprintf("AI Gateway has not accepted the anchor AIGatewayRoute %q yet", anchor), c))
	}
	return nil
}

// observeClientPolicy requires Envoy Gateway to have accepted the
// ClientTrafficPolicy for this Gateway. Until it has, the listener keeps
// its 32 KiB buffer and long prompts fail while the gateway looks ready.
func (b builder) observeClientPolicy(e *evidence, obs map[string]remote.Observed) error {
	var err error
	e.clientPolicyAccepted, err = b.policyAccepted(e, obs, resourceClientPolicy, ReasonClientPolicyNotAccepted,
		"ClientTrafficPolicy", names.ClientPolicy(b.in.GatewayName), " yet; until it does, request and response bodies over 32 KiB fail")
	return err
}

// policyAccepted reports whether Envoy Gateway has accepted, for this
// Gateway, the live policy observed under resource, and otherwise adds a
// problem with reason that names the policy (what, name) and says what its
// absence costs (consequence, after "for the Gateway ...").
func (b builder) policyAccepted(e *evidence, obs map[string]remote.Observed, resource, reason, what, name, consequence string) (bool, error) {
	o, ok := obs[resource]
	if !ok || !o.Live() {
		e.problems.Add(reason, fmt.Sprintf("the %s %q has not been observed yet%s", what, name, syncNote(o, ok)))
		return false, nil
	}
	c, err := upstream.PolicyAccepted(o.Manifest(), b.in.GatewayNamespace, b.in.GatewayName)
	if err != nil {
		return false, errors.Wrapf(err, "cannot read the observed %s %q", what, name)
	}
	if !upstream.IsTrue(c) {
		e.problems.Add(reason, upstream.WithMessage(fmt.Sprintf("Envoy Gateway has not accepted the %s %q for the Gateway %q%s", what, name, b.in.GatewayName, consequence), c))
		return false, nil
	}
	return true, nil
}

// observeDeployment evaluates the rollout rule on the live Envoy
// Deployment, and plans the function's own marker on what it shows. It
// runs after observeAnchor, whose verdict the plan needs.
func (b builder) observeDeployment(e *evidence, obs map[string]remote.Observed, rule *rollout.Rule, rec *v1alpha1.MarkerStatus, now time.Time) error {
	dn := names.EnvoyDeployment(b.in.GatewayNamespace, b.in.GatewayName)
	dep, ok := obs[ResourceEnvoyDeployment]
	carried := carriedMarker(obs)
	if !ok || !dep.Live() {
		e.marker = planMarker(e, carried, rec, now)
		e.problems.Add(ReasonDeploymentNotObserved, fmt.Sprintf("the Envoy Deployment %q in %q has not been observed%s", dn, b.in.EnvoyGatewayNamespace, syncNote(dep, ok)))
		return nil
	}
	live := dep.Manifest()
	d := &appsv1.Deployment{}
	if err := decode.Into(fmt.Sprintf("the observed Envoy Deployment %q", dn), "", live, d); err != nil {
		return err
	}
	e.deployment = d
	v, err := rule.Evaluate(live)
	if err != nil {
		return err
	}
	e.rollout = v
	e.marker = planMarker(e, carried, rec, now)
	for _, c := range v.Failed {
		msg := rolloutMessage(c, d)
		if c == rollout.ExtProcMarkerMissing {
			msg = b.markerMessage(e.marker, b.in.ExtProcMarkerAnnotations)
		}
		e.problems.Add(string(c), msg)
	}
	return nil
}

// condition is GatewayReady: the first failed check as the reason, and
// every failed check in the message.
func (e *evidence) condition(d string, auth bool) compose.Condition {
	msg := ""
	if e.problems.None() {
		st := e.deployment.Status
		accepted := "anchor route and client policy accepted"
		if auth {
			accepted = "anchor route, client policy and caller auth accepted"
		}
		msg = fmt.Sprintf("Gateway has address %s and every listener programmed; %s; Envoy Deployment %q rolled out with the ext-proc marker: %d of %d replicas run the current template, %d available",
			e.address, accepted, d, st.UpdatedReplicas, st.Replicas, st.AvailableReplicas)
		if len(e.authWarnings) > 0 {
			msg += ". Caller auth: " + strings.Join(e.authWarnings, "; ")
		}
	}
	return e.problems.Condition(ConditionType, ReasonReady, msg)
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

// syncNote explains why an Object's view cannot be trusted.
func syncNote(o remote.Observed, exists bool) string {
	switch {
	case !exists:
		return ""
	case o.Synced.Status == "" && !o.Reported():
		return " (the Object has not reported yet)"
	case !o.Synced.True():
		if o.Synced.Message != "" {
			return fmt.Sprintf(" (the Object is not Synced: %s)", o.Synced.Message)
		}
		return " (the Object is not Synced)"
	}
	return ""
}
