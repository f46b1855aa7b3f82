package controlplane

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// newGatewayWithRouteDuringRollout is scenarios 1 and 2, the case the
// product exists for. The first Envoy pods come before AI Gateway's
// filter-config Secret, so they have no ext-proc sidecar, and they start;
// AI Gateway rolls the Deployment for the sidecar, and the kubelet
// stand-in holds the pods that have it, like a node still pulling the
// ext-proc image. So Ready Envoy pods without the sidecar serve while the
// ModelRoute arrives: it must be composed at once, and must not say
// RoutingReady=True until they are gone (the sidecar invariant,
// harness/sidecar.go).
//
// With the real controllers the race between the first pods and AI
// Gateway's filter-config Secret goes either way (both were seen here), so
// the scenario forces this order: the API server refuses the Secret until
// the first pods exist (holdFilterConfigSecret). Scenario 4b shows the
// other order.
//
// It holds the Secret past the first pods' rollout and the function's
// marker settle time, as when AI Gateway's gateway controller fails
// before it creates the Secret: the function must not write its own
// ext-proc marker then (secretHeldPastSettle).
func (sc *scenarios) newGatewayWithRouteDuringRollout(t *testing.T) {
	c, w, s := sc.c, sc.w, sc.s
	s.Kubelet.SetHoldSidecar(true)
	release := sc.holdFilterConfigSecret(t)

	// The gateway namespace is the function's to create, through
	// provider-kubernetes: nothing has made it yet.
	if _, err := sc.get(sc.ctx, harness.GVRNamespace, "", harness.GatewayNS); !apierrors.IsNotFound(err) {
		t.Fatalf("the gateway namespace %s exists before the InferenceGateway (%v): the suite must not create it", harness.GatewayNS, err)
	}

	sc.t0 = time.Now()
	w.Timeline.Start(sc.t0)
	w.Timeline.Mark(harness.TLXRCreated, sc.t0)
	c.Apply(sc.ctx, c.ReadYAMLFile(filepath.Join("example", "gateway", "xr.yaml"))...)
	sc.gatewayNamespaceByProvider(t)
	sc.eventually(t, waitSettle, "the first Envoy pods", func(ctx context.Context) string {
		created := w.PodsCreated(sc.t0)
		if len(created) == 0 {
			return "no Envoy pod yet"
		}
		if created[0].WithSidecar > 0 {
			t.Fatalf("an Envoy pod got the sidecar while the filter-config Secret was held: %s", created[0])
		}
		return ""
	})
	sc.secretHeldPastSettle(t)
	release()

	// Scenario 1: the gateway comes up, and its Deployment rolls the
	// marker in, but no pod with the sidecar can start. GatewayReady must
	// say False, for the reason the rule gives.
	sc.eventually(t, waitSettle, "AI Gateway to patch its marker and the Deployment controller to start rolling", func(ctx context.Context) string {
		d := sc.envoyDeployment(ctx)
		if d == nil {
			return "no Envoy Deployment yet"
		}
		if markerWrites(w.MarkerChanges(), harness.AIGWUUID) == 0 {
			return "AI Gateway has written no uuid marker yet"
		}
		if harness.Int64At(d.Object, "status", "observedGeneration") < d.GetGeneration() {
			return "the Deployment controller has not observed the marker patch"
		}
		if harness.Int64At(d.Object, "status", "availableReplicas") == 0 {
			return "no Envoy pod without the sidecar is available yet"
		}
		return ""
	})
	for _, m := range w.MarkerChanges() {
		if m.Values[harness.AIGWUUID] != "" {
			w.Timeline.Mark(harness.TLMarkerPatchFirst, m.At)
			break
		}
	}
	// Which way the race went: AI Gateway v1.0.0 writes its marker only
	// when pods and routes disagree, so the first pods had no sidecar
	// (they came before its filter-config Secret).
	for _, rs := range w.PodsCreated(sc.t0) {
		t.Logf("scenario 1: %s", rs)
	}
	if st := sc.agree(t); st == "True" {
		t.Fatalf("GatewayReady=True while no Envoy pod with the sidecar could start")
	}
	xr := sc.gatewayXR(sc.ctx)
	t.Logf("while pods with the sidecar are held: GatewayReady=%s (%s): %v", harness.ConditionStatus(xr, gateway.ConditionType),
		harness.ConditionReason(xr, gateway.ConditionType), harness.Condition(xr, gateway.ConditionType)["message"])

	// Scenario 2: a ModelRoute created now is composed at once — its
	// AIGatewayRoute reaches the gateway cluster — but RoutingReady waits
	// for the gateway.
	for _, u := range c.ReadYAMLFile(filepath.Join("example", "route", "ready", "required.yaml")) {
		if u.GetKind() == "Secret" { // the openrouter backend's API key
			v, _, _ := unstructured.NestedString(u.Object, "data", harness.APIKeyField)
			w.Forbid("the openrouter API key", v)
			// The example gives it the resourceVersion the function reads
			// when rendering; here the API server sets its own.
			u.SetResourceVersion("")
			c.Apply(sc.ctx, u)
		}
	}
	w.Timeline.Mark(harness.TLRouteCreated, time.Now())
	c.Apply(sc.ctx, c.ReadYAMLFile(filepath.Join("example", "route", "xr.yaml"))...)
	sc.eventually(t, waitSettle, "the model's AIGatewayRoute on the gateway cluster", func(ctx context.Context) string {
		if _, err := sc.get(ctx, harness.GVRAIRoute, w.TeamNS, harness.RouteName); err != nil {
			return err.Error()
		}
		return ""
	})
	sc.noSecretsInObjects(t, "once the ModelRoute's objects reach the gateway cluster")
	sc.eventually(t, waitSettle, "RoutingReady to report WaitingForGateway", func(ctx context.Context) string {
		r := sc.routeXR(ctx)
		if st, reason := harness.ConditionStatus(r, "RoutingReady"), harness.ConditionReason(r, "RoutingReady"); st != "False" || reason != "WaitingForGateway" {
			return fmt.Sprintf("RoutingReady=%q (%s)", st, reason)
		}
		return ""
	})
	if st := harness.ConditionStatus(sc.gatewayXR(sc.ctx), gateway.ConditionType); st == "True" {
		t.Fatalf("GatewayReady turned True while pods with the sidecar were held")
	}

	// Let the pods start: the Deployment controller finishes the rollout,
	// and only then may GatewayReady, and after it RoutingReady, be True.
	w.Timeline.Mark(harness.TLKubeletReleased, time.Now())
	s.Kubelet.SetHoldSidecar(false)
	sc.eventually(t, waitSettle, "GatewayReady=True", func(ctx context.Context) string {
		return wantCondition(sc.gatewayXR(ctx), gateway.ConditionType, "True")
	})
	if st := sc.agree(t); st != "True" {
		t.Errorf("settled GatewayReady=%s, want True", st)
	}
	sc.eventually(t, waitRoute, "RoutingReady=True", func(ctx context.Context) string {
		return wantCondition(sc.routeXR(ctx), "RoutingReady", "True")
	})
	sc.envoyIsTold(t)
	key := sc.controlPlaneKey(t)
	sc.eventually(t, waitRoute, "the openrouter API key in the gateway cluster's Secret", func(ctx context.Context) string {
		return sc.gatewayKeyIs(ctx, key)
	})
	sc.routesAttached(t)
	sc.allAccepted(t, "scenario 2")
	sc.noSecretsInObjects(t, "once the route is served")

	// Order, from the recorded timeline: GatewayReady only after the
	// rollout finished, RoutingReady only after GatewayReady.
	order := []string{harness.TLDeployment, harness.TLMarker, harness.TLRolloutComplete, harness.TLGatewayReady, harness.TLRoutingReady}
	var prev time.Duration
	for i, m := range order {
		at, ok := w.Timeline.Has(m)
		if !ok {
			t.Errorf("the timeline has no %q", m)
			continue
		}
		if i > 0 && at < prev {
			t.Errorf("%q at %.2fs came before %q at %.2fs", m, at.Seconds(), order[i-1], prev.Seconds())
		}
		prev = at
	}
	if at, ok := w.Timeline.Has(harness.TLRouteObject); !ok {
		t.Errorf("the model's AIGatewayRoute never appeared in the timeline")
	} else if gr, _ := w.Timeline.Has(harness.TLGatewayReady); at > gr {
		t.Errorf("the model's AIGatewayRoute appeared at %.2fs, after GatewayReady at %.2fs: it should not wait for the gateway", at.Seconds(), gr.Seconds())
	}
	for ev, m := range map[string]string{evObjectReady: harness.TLObjectReady, evGatewayReady: harness.TLGatewayReady, evRoutingReady: harness.TLRoutingReady, evRolloutDone: harness.TLRolloutComplete} {
		if at, ok := w.Timeline.Has(m); ok {
			sc.sp.Record("scenario-1", ev, seconds(at))
		}
	}
	gw, rt := w.Transitions()
	t.Logf("scenario 1 timeline (seconds since the InferenceGateway was created):\n%s", w.Timeline)
	t.Logf("GatewayReady transitions:\n%s", harness.FormatTransitions(sc.t0, gw))
	t.Logf("RoutingReady transitions:\n%s", harness.FormatTransitions(sc.t0, rt))
	t.Logf("Synced transitions of the gateway's Objects:\n%s", w.SyncedTransitions(sc.t0))
	w.Check(t)
}

// routesAttached checks what the Gateway the function composed makes of
// the HTTPRoutes AI Gateway generates. The model's, in the team namespace
// its listeners admit by label, is Accepted and resolves every
// backendRef, one per backend of the AIGatewayRoute's rule, each an Envoy
// Gateway Backend. The anchor's, in the gateway namespace, which no
// listener admits, is not accepted: NotAllowedByListeners, as Envoy
// Gateway v1.8.3 says of it (internal/gatewayapi/route.go,
// processAllowedListenersForParentRefs).
func (sc *scenarios) routesAttached(t *testing.T) {
	t.Helper()
	sc.eventually(t, waitSettle, "the model's HTTPRoute accepted by the Gateway with every ref resolved", func(ctx context.Context) string {
		ar, err := sc.get(ctx, harness.GVRAIRoute, sc.w.TeamNS, harness.RouteName)
		if err != nil {
			return err.Error()
		}
		hr, err := sc.get(ctx, harness.GVRHTTPRoute, sc.w.TeamNS, harness.RouteName)
		if err != nil {
			return err.Error()
		}
		if owner := hr.GetOwnerReferences(); len(owner) != 1 || owner[0].Kind != "AIGatewayRoute" || owner[0].UID != ar.GetUID() {
			return fmt.Sprintf("the HTTPRoute is owned by %v, want its AIGatewayRoute", owner)
		}
		aiRules, _, _ := unstructured.NestedSlice(ar.Object, "spec", "rules")
		rules, _, _ := unstructured.NestedSlice(hr.Object, "spec", "rules")
		if len(rules) != len(aiRules)+1 {
			return fmt.Sprintf("the HTTPRoute has %d rules, want the AIGatewayRoute's %d and route-not-found", len(rules), len(aiRules))
		}
		for i, x := range aiRules {
			aiBRs, _ := x.(map[string]any)["backendRefs"].([]any)
			brs, _ := rules[i].(map[string]any)["backendRefs"].([]any)
			if len(brs) != len(aiBRs) {
				return fmt.Sprintf("HTTPRoute rule %d has %d backendRefs, want the AIGatewayRoute rule's %d", i, len(brs), len(aiBRs))
			}
			for _, y := range brs {
				if br, _ := y.(map[string]any); br["group"] != "gateway.envoyproxy.io" || br["kind"] != "Backend" {
					return fmt.Sprintf("HTTPRoute rule %d refers to %v, want Envoy Gateway Backends", i, br)
				}
			}
		}
		p := parentStatus(hr, harness.GatewayNS, harness.GatewayXRName)
		if p == nil {
			return "no status.parents entry for the Gateway " + harness.GatewayNS + "/" + harness.GatewayXRName
		}
		if a, r := parentCondition(p, "Accepted"), parentCondition(p, "ResolvedRefs"); a != "True (Accepted)" || r != "True (ResolvedRefs)" {
			return fmt.Sprintf("Accepted=%s, ResolvedRefs=%s", a, r)
		}
		return ""
	})
	anchor := names.AnchorRoute(harness.GatewayXRName)
	sc.eventually(t, waitSettle, "the anchor's HTTPRoute refused by every listener", func(ctx context.Context) string {
		hr, err := sc.get(ctx, harness.GVRHTTPRoute, harness.GatewayNS, anchor)
		if err != nil {
			return err.Error()
		}
		p := parentStatus(hr, harness.GatewayNS, harness.GatewayXRName)
		if p == nil {
			return "no status.parents entry for the Gateway"
		}
		if a := parentCondition(p, "Accepted"); a != "False (NotAllowedByListeners)" {
			return "Accepted=" + a
		}
		return ""
	})
}

// gatewayNamespaceByProvider requires the gateway namespace to come into
// being through the function's gateway-namespace Object: that Object,
// composed for the InferenceGateway in ObjectNS, names the namespace and
// never deletes it (managementPolicies Observe, Create, Update), and the
// first write of the namespace the API server audited created it (201),
// as provider-kubernetes' gateway identity, with a server-side apply whose
// field manager is that Object's (provider-kubernetes v1.4.1 and v1.3.1
// syncer.go, SyncResource: provider-kubernetes/<Object name>).
func (sc *scenarios) gatewayNamespaceByProvider(t *testing.T) {
	t.Helper()
	var obj *unstructured.Unstructured
	var writes []harness.AuditEvent
	sc.eventually(t, waitSettle, "the gateway namespace, created by provider-kubernetes", func(ctx context.Context) string {
		obj = sc.composedObject(ctx, harness.ObjectNS, harness.GatewayXRName, harness.ResourceGatewayNamespace)
		if obj == nil {
			return fmt.Sprintf("no %s Object of the InferenceGateway in %s", harness.ResourceGatewayNamespace, harness.ObjectNS)
		}
		if _, err := sc.get(ctx, harness.GVRNamespace, "", harness.GatewayNS); err != nil {
			return err.Error()
		}
		var err error
		if writes, err = sc.c.NamespaceWrites(harness.GatewayNS); err != nil {
			return err.Error()
		}
		if len(writes) == 0 {
			return "no write of the namespace in the audit log yet"
		}
		return ""
	})
	kind, _, _ := unstructured.NestedString(obj.Object, "spec", "forProvider", "manifest", "kind")
	name, _, _ := unstructured.NestedString(obj.Object, "spec", "forProvider", "manifest", "metadata", "name")
	if kind != "Namespace" || name != harness.GatewayNS {
		t.Errorf("the %s Object manages %s %q, want Namespace %q", harness.ResourceGatewayNamespace, kind, name, harness.GatewayNS)
	}
	policies, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "managementPolicies")
	sort.Strings(policies)
	if want := []string{"Create", "Observe", "Update"}; !slices.Equal(policies, want) {
		t.Errorf("the %s Object's managementPolicies are %v, want %v: the namespace is never deleted", harness.ResourceGatewayNamespace, policies, want)
	}
	first := writes[0]
	manager := "provider-kubernetes/" + obj.GetName()
	if first.ResponseStatus.Code != 201 || first.User.Username != sc.c.GatewayUser ||
		!strings.Contains(first.RequestURI, "fieldManager="+url.QueryEscape(manager)) {
		t.Errorf("the gateway namespace %s was first written by %s %s (%d) as %s, want created (201) by a server-side apply of %s as %s",
			harness.GatewayNS, first.Verb, first.RequestURI, first.ResponseStatus.Code, first.User.Username, manager, sc.c.GatewayUser)
	}
	t.Logf("the gateway namespace %s was created %.2fs after the InferenceGateway by %s %s as %s",
		harness.GatewayNS, first.StageTimestamp.Sub(sc.t0).Seconds(), first.Verb, first.RequestURI, first.User.Username)
}

var (
	gvrVAP        = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	gvrVAPBinding = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}
)

// holdFilterConfigSecret makes the API server refuse to create AI
// Gateway's filter-config Secret, with a ValidatingAdmissionPolicy, until
// the returned release is called. Scenario 1 uses it to force the usual
// order of the race (the first Envoy pods before the Secret, so without
// the sidecar): with the real controllers either order happens, and a run
// must show the one it is about. AI Gateway retries the refused create
// (its reconcile returns the error).
func (sc *scenarios) holdFilterConfigSecret(t *testing.T) (release func()) {
	t.Helper()
	const name = "controlplane-suite-hold-filter-config-secret"
	sc.c.Create(sc.ctx, gvrVAP, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"failurePolicy": "Fail",
			"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
				"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"secrets"},
			}}},
			"validations": []any{map[string]any{
				"expression": fmt.Sprintf("object.metadata.name != %q", filterConfigSecret),
				"message":    "held by the control-plane suite",
			}},
		},
	}})
	sc.c.Create(sc.ctx, gvrVAPBinding, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"policyName":        name,
			"validationActions": []any{"Deny"},
			"matchResources": map[string]any{"namespaceSelector": map[string]any{
				"matchLabels": map[string]any{"kubernetes.io/metadata.name": harness.EnvoyGatewayNS},
			}},
		},
	}})
	// The API server applies a new policy within a moment; a dry-run
	// create says when.
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": filterConfigSecret, "namespace": harness.EnvoyGatewayNS},
	}}
	sc.eventually(t, waitSettle, "the API server to refuse the filter-config Secret", func(ctx context.Context) string {
		_, err := sc.c.Dyn.Resource(harness.GVRSecret).Namespace(harness.EnvoyGatewayNS).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || !strings.Contains(err.Error(), "held by the control-plane suite") {
			return fmt.Sprintf("a dry-run create gave %v", err)
		}
		return ""
	})
	return func() {
		for _, r := range []struct {
			gvr  schema.GroupVersionResource
			name string
		}{{gvrVAPBinding, name}, {gvrVAP, name}} {
			if err := sc.c.Dyn.Resource(r.gvr).Delete(sc.ctx, r.name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("cannot delete %s %s: %v", r.gvr.Resource, r.name, err)
			}
		}
	}
}

// heldPastSettle is how long scenario 1 keeps the filter-config Secret
// held after the first Envoy pods' rollout completed: past the function's
// 15 s marker settle time (internal/gatewayready marker.go), with a margin for
// the reconciles that would have written it.
const heldPastSettle = 30 * time.Second

// secretHeldPastSettle waits, with AI Gateway's filter-config Secret held,
// for the first Envoy pods' rollout to complete (Progressing
// NewReplicaSetAvailable: the pods have no sidecar, and the kubelet
// stand-in starts them), then watches for heldPastSettle: the anchor is
// accepted and the rollout is done, which is all the function's own
// ext-proc marker once needed, but the Secret is missing, so new pods
// would get no sidecar either. The function must not write its marker,
// and GatewayReady must stay False all that time.
func (sc *scenarios) secretHeldPastSettle(t *testing.T) {
	t.Helper()
	sc.eventually(t, waitSettle, "the first Envoy pods' rollout to complete", func(ctx context.Context) string {
		d := sc.envoyDeployment(ctx)
		if d == nil {
			return "no Envoy Deployment yet"
		}
		conds, _, _ := unstructured.NestedSlice(d.Object, "status", "conditions")
		for _, c := range conds {
			cm, _ := c.(map[string]any)
			if cm["type"] == "Progressing" && cm["reason"] == "NewReplicaSetAvailable" {
				return ""
			}
		}
		return "the Deployment's Progressing condition does not say NewReplicaSetAvailable yet"
	})
	completed := time.Now()
	checks := 0
	for time.Since(completed) < heldPastSettle {
		if n := markerWrites(sc.w.MarkerChanges(), harness.OwnMarker); n > 0 {
			t.Fatalf("the function wrote its own ext-proc marker while AI Gateway's filter-config Secret was missing: the new pods would have no sidecar either")
		}
		if st := harness.ConditionStatus(sc.gatewayXR(sc.ctx), gateway.ConditionType); st == "True" {
			t.Fatalf("GatewayReady=True while AI Gateway's filter-config Secret was missing and no Envoy pod had the sidecar")
		}
		checks++
		select {
		case <-sc.ctx.Done():
			t.Fatalf("cannot hold the filter-config Secret: %v", sc.ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	xr := sc.gatewayXR(sc.ctx)
	msg, _ := harness.Condition(xr, gateway.ConditionType)["message"].(string)
	t.Logf("filter-config Secret held %s past the rollout's completion (%d checks): GatewayReady=%s (%s): %s", heldPastSettle, checks,
		harness.ConditionStatus(xr, gateway.ConditionType), harness.ConditionReason(xr, gateway.ConditionType), msg)
	if !strings.Contains(msg, filterConfigSecret) {
		t.Errorf("GatewayReady's message does not name the missing filter-config Secret %q: %s", filterConfigSecret, msg)
	}
}
