package gatewayready

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
	"github.com/modelplaneai/function-inference-gateway/internal/rollout"
)

// The function's own ext-proc marker (rollout.VerifiedMarker), for AI
// Gateway v1.0.0.
//
// v1.0.0 writes its uuid marker on the Envoy pod template only when the
// pods' sidecar state disagrees with whether a route is attached (ai-gateway
// v1.0.0 internal/controller/gateway.go, annotateGatewayPods). Its
// controller creates the filter-config Secret only once the Envoy
// Deployment or its pods exist (Reconcile requeues every 5 s until then),
// and its pod webhook, which fails closed, injects the sidecar at pod
// creation only while a route is attached and that Secret exists
// (gateway_mutator.go, mutatePod). Envoy pods first created after the
// Secret (pod creation delayed, or the Deployment re-created by Envoy
// Gateway while the Secret stays) have the sidecar, so v1.0.0 never writes
// a marker, and the readiness rule would wait forever.
//
// So the function writes the marker itself once it has seen, in one
// reconcile, that
//   - the Envoy Deployment is observed and every rollout clause holds but
//     ExtProcMarkerMissing: the current template's pods are all there, and
//     no marker is;
//   - the Deployment's Progressing condition says NewReplicaSetAvailable:
//     the Deployment controller's own record that the rollout completed;
//   - the anchor AIGatewayRoute is Accepted;
//   - AI Gateway's filter-config Secret exists. The anchor's Accepted is
//     written by another controller and proves nothing about the Secret:
//     AI Gateway's gateway controller can fail before it creates it (any
//     error before reconcileFilterConfigSecret in gateway.go) and then
//     backs off without writing its uuid, and the webhook admits pods
//     without the sidecar while the Secret is missing;
// and has kept seeing it for markerSettle. While pods roll, v1.0.0
// requeues every 5 s (isRolloutInProgress), so its first look after the
// roll ended comes within 5 s, and it then writes its uuid if any pod lacks
// the sidecar; markerSettle leaves three times that.
//
// The Secret holds the backends' API keys, and provider-kubernetes copies
// an observed object into the Object's status unless it runs with
// --sanitize-secrets; so the function observes it only when the Input says
// the provider does (providerSanitizesSecrets), and otherwise never writes
// its marker and says what to do.
//
// The new pods of the roll the marker then causes are all created after
// the anchor was accepted and after the Secret existed, so the webhook
// injects the sidecar into each of them, and the template carries positive
// evidence for the one CEL rule that provider-kubernetes evaluates as well.
//
// The function sets it through the EnvoyProxy's pod annotations: Envoy
// Gateway copies them into the Deployment's pod template (gateway v1.8.3
// internal/infrastructure/kubernetes/proxy/resource_provider.go,
// getPodAnnotations) and server-side applies the Deployment
// (internal/infrastructure/kubernetes/infra_resource.go,
// createOrUpdateDeployment), so AI Gateway's own template annotation,
// another field manager's, survives beside it.
//
// Once written it is never removed or changed, since a change rolls every
// Envoy pod: it is carried forward from what the function composed before.
// On AI Gateway v1.1.0 the extproc-config-hash is on the template within
// seconds of the anchor attaching, so the fallback never triggers; and a
// v1.0.0 gateway whose first pods lacked the sidecar gets the uuid marker
// as before, with no extra roll.

// markerSettle is how long the function waits, once it has first seen
// the Deployment's rollout complete with every other condition for its
// marker met, before it writes the marker: three times AI Gateway v1.0.0's
// 5 s requeue during a rollout.
//
// It is measured between two of the function's own observations, never by
// comparing the gateway cluster's timestamps with the function's clock:
// the first sight is recorded in the composite's status
// (status.extProcMarker) and carried from reconcile to reconcile, so a
// clock that runs ahead or behind the cluster's cannot shorten it.
const markerSettle = 15 * time.Second

// reasonNewReplicaSetAvailable is the Progressing reason the Deployment
// controller sets once a rollout has completed (kubernetes v1.36.1
// pkg/controller/deployment/progress.go, syncRolloutStatus, with
// util.NewRSAvailableReason). Its lastUpdateTime is when that happened:
// SetDeploymentCondition leaves a condition alone while its status and
// reason stay (util/deployment_util.go).
const reasonNewReplicaSetAvailable = "NewReplicaSetAvailable"

// RecordedMarker reads the function's record from the observed composite;
// an unreadable one reads as none, which only restarts the settle time.
func RecordedMarker(xr map[string]any) *v1alpha1.MarkerStatus {
	m, _, _ := unstructured.NestedStringMap(xr, "status", "extProcMarker")
	if m["rolloutCompleted"] == "" || m["firstSeen"] == "" {
		return nil
	}
	return &v1alpha1.MarkerStatus{RolloutCompleted: m["rolloutCompleted"], FirstSeen: m["firstSeen"]}
}

// Marker is what the function does with its marker in this reconcile.
type Marker struct {
	// Value is the marker to compose on the EnvoyProxy: the one composed
	// before, or the completed rollout's time when written in this
	// reconcile; empty for none.
	Value string
	// Written: the function decided to write it in this reconcile.
	Written bool
	// Due is when the function will write it, if nothing else changes and
	// AI Gateway writes no marker; zero when it is not in sight.
	Due time.Time
	// since is when the Deployment's rollout completed (the Progressing
	// condition's lastUpdateTime), when it says so.
	since time.Time
	// firstSeen is when the function first saw the rollout complete with
	// every other condition met.
	firstSeen time.Time
	// Record goes into the composite's status while the marker is in
	// sight, so that the next reconcile keeps counting from firstSeen.
	Record *v1alpha1.MarkerStatus
	// blockers say what else the function waits for before it writes it.
	blockers []string
	// unverifiable: all else holds, but the function cannot observe AI
	// Gateway's filter-config Secret (the provider does not sanitize
	// Secrets), so it never writes its marker.
	unverifiable bool
}

// carriedMarker is the function's marker as composed before: on the
// observed EnvoyProxy Object's applied manifest, or its live EnvoyProxy, or,
// should both lack it, the live Envoy Deployment's template (only the
// function writes that key, through the EnvoyProxy). A bad or missing
// observation of one leaves the others; the value is taken as it is.
func (g Gateway) carriedMarker(obs map[string]remote.Observed) string {
	path := []string{"spec", "provider", "kubernetes", "envoyDeployment", "pod", "annotations", rollout.VerifiedMarker}
	if ep, ok := obs[g.Resources.EnvoyProxy]; ok {
		if v := ep.AppliedString(path...); v != "" {
			return v
		}
		if v := ep.LiveString(path...); v != "" {
			return v
		}
	}
	if dep, ok := obs[g.Resources.EnvoyDeployment]; ok {
		return dep.LiveString("spec", "template", "metadata", "annotations", rollout.VerifiedMarker)
	}
	return ""
}

// planMarker decides, from the evidence of this reconcile and the record
// of earlier ones, whether the function writes its marker now, and
// otherwise when it would.
func planMarker(e *Evidence, carried string, rec *v1alpha1.MarkerStatus, now time.Time) Marker {
	if carried != "" {
		return Marker{Value: carried}
	}
	m := markerEvidence(e)
	if len(m.blockers) > 0 || m.since.IsZero() || m.unverifiable {
		return m
	}
	completed := m.since.Format(time.RFC3339)
	// A first sight is recorded to the whole second, rounded up, so that
	// the settle time is never shortened by the record's precision.
	m.firstSeen = now.UTC().Truncate(time.Second)
	if m.firstSeen.Before(now) {
		m.firstSeen = m.firstSeen.Add(time.Second)
	}
	if rec != nil && rec.RolloutCompleted == completed {
		if t, err := time.Parse(time.RFC3339, rec.FirstSeen); err == nil && !t.After(m.firstSeen) {
			m.firstSeen = t.UTC()
		}
	}
	m.Record = &v1alpha1.MarkerStatus{RolloutCompleted: completed, FirstSeen: m.firstSeen.Format(time.RFC3339)}
	if now.Sub(m.firstSeen) >= markerSettle {
		m.Value, m.Written = completed, true
		return m
	}
	m.Due = m.firstSeen.Add(markerSettle)
	return m
}

// markerEvidence reads, from this reconcile's evidence, when the rollout
// completed and what else the function's marker waits for.
func markerEvidence(e *Evidence) Marker {
	var m Marker
	d := e.Deployment
	if d == nil || !markerOnlyMissing(e.Rollout) {
		m.blockers = append(m.blockers, "every other clause of the rollout rule holds")
	}
	if d != nil {
		switch c := progressing(d); {
		case c == nil:
			m.blockers = append(m.blockers, "the Deployment reports its Progressing condition")
		case c.Reason != reasonNewReplicaSetAvailable || c.LastUpdateTime.IsZero():
			m.blockers = append(m.blockers, fmt.Sprintf("the Deployment's Progressing condition says %s (now %s)", reasonNewReplicaSetAvailable, c.Reason))
		default:
			m.since = c.LastUpdateTime.UTC()
		}
	}
	if !e.AnchorAccepted {
		m.blockers = append(m.blockers, "the anchor route is accepted")
	}
	switch fc := e.filterConfig; {
	case !fc.observed:
		m.unverifiable = true
	case !fc.seen:
		m.blockers = append(m.blockers, fmt.Sprintf("AI Gateway's filter-config Secret %q exists in %q (without it AI Gateway's webhook admits new Envoy pods without the sidecar)", fc.name, fc.namespace))
	}
	return m
}

// markerOnlyMissing reports whether ExtProcMarkerMissing is the one clause
// of the rollout rule that fails.
func markerOnlyMissing(v rollout.Verdict) bool {
	return len(v.Failed) == 1 && v.Failed[0] == rollout.ExtProcMarkerMissing
}

func progressing(d *appsv1.Deployment) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == appsv1.DeploymentProgressing {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// markerMessage is GatewayReady's message while ExtProcMarkerMissing:
// what is awaited, and when the function rolls the Envoy pods itself.
func (g Gateway) markerMessage(m Marker, markers []string) string {
	ep := g.In.GatewayName
	if m.Value != "" && !m.Written {
		return fmt.Sprintf("the Envoy pod template has none of the ext-proc markers %s yet, and Envoy Gateway has not yet copied the function's own marker %s=%s from the EnvoyProxy %q into it; the Envoy pods roll once it has",
			strings.Join(markers, ", "), rollout.VerifiedMarker, m.Value, ep)
	}
	awaited := fmt.Sprintf("the Envoy pod template has none of the ext-proc markers %s yet; AI Gateway v1.1.0 writes its extproc-config-hash within seconds of a route attaching, v1.0.0 its uuid only when it changes the sidecar", strings.Join(markers, ", "))
	switch {
	case m.Written:
		return fmt.Sprintf("%s. AI Gateway wrote none in the %s since the function saw the Deployment's rollout complete (at %s) with its filter-config Secret present, so the function has set its own marker %s=%s on the EnvoyProxy %q; Envoy Gateway rolls the Envoy pods with it once",
			awaited, markerSettle, m.since.Format(time.RFC3339), rollout.VerifiedMarker, m.Value, ep)
	case !m.Due.IsZero():
		return fmt.Sprintf("%s. If AI Gateway writes no marker, the function will roll the Envoy pods itself at %s, setting its own marker %s on the EnvoyProxy %q (%s after it first saw the Deployment's rollout, completed at %s, with AI Gateway's filter-config Secret present)",
			awaited, m.Due.Format(time.RFC3339), rollout.VerifiedMarker, ep, markerSettle, m.since.Format(time.RFC3339))
	case m.unverifiable && len(m.blockers) == 0:
		return fmt.Sprintf("%s. On AI Gateway v1.0.0 a gateway whose first Envoy pods already had the sidecar never gets a marker. The function would then write its own (%s), but only on evidence that AI Gateway's filter-config Secret %q exists in %q, without which new pods get no sidecar; that Secret holds the backends' API keys, so the function observes it only when provider-kubernetes runs with --sanitize-secrets. Run the provider with --sanitize-secrets and set the function Input's providerSanitizesSecrets: true, or upgrade AI Gateway to v1.1.0 or later",
			awaited, rollout.VerifiedMarker, names.FilterConfigSecret(g.In.GatewayNamespace, g.In.GatewayName), g.In.EnvoyGatewayNamespace)
	case m.unverifiable:
		return fmt.Sprintf("%s. The function does not write its own marker %s: it cannot observe AI Gateway's filter-config Secret unless provider-kubernetes runs with --sanitize-secrets and the function Input sets providerSanitizesSecrets: true",
			awaited, rollout.VerifiedMarker)
	}
	return fmt.Sprintf("%s. If AI Gateway writes no marker, the function will roll the Envoy pods itself, setting its own marker %s on the EnvoyProxy %q, %s after it has seen the Deployment's rollout complete, once %s",
		awaited, rollout.VerifiedMarker, ep, markerSettle, strings.Join(m.blockers, " and "))
}

// MarkerNotice is the Normal result of the reconcile that writes the
// function's marker: which Deployment, and why.
func (g Gateway) MarkerNotice(m Marker) string {
	return fmt.Sprintf("the function set its own ext-proc marker %s=%s on the EnvoyProxy %q, which rolls the Envoy Deployment %q once: the Deployment completed its rollout at %s with the anchor AIGatewayRoute %q accepted and AI Gateway's filter-config Secret %q present, and AI Gateway wrote no ext-proc marker on its pod template in the %s since the function first saw that (v1.0.0 writes one only when the pods' sidecar state disagrees with its routes). The new pods are created after AI Gateway accepted the anchor and created its filter-config Secret, so its webhook gives each of them the sidecar",
		rollout.VerifiedMarker, m.Value, g.In.GatewayName, names.EnvoyDeployment(g.In.GatewayNamespace, g.In.GatewayName), m.since.Format(time.RFC3339), names.AnchorRoute(g.In.GatewayName),
		names.FilterConfigSecret(g.In.GatewayNamespace, g.In.GatewayName), markerSettle)
}
