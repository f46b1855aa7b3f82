package controlplane

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/gatewayready"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
)

// The callers' Secrets of scenario 5c, on the control plane in objectNS,
// and the label spec.auth selects them by.
const (
	callersSecret    = "platform-callers"
	callersSecret2   = "search-callers"
	callersLabel     = "modelplane.ai/callers"
	callersLabelTrue = "true"
)

// callerAuth is scenario 5c: while the model is served, the platform turns
// on caller authentication, then rotates a key and adds a client, adds a
// Secret Envoy Gateway could not use, loses a copy on the gateway cluster,
// and finally removes every callers' Secret and turns authentication off
// again. GatewayReady must follow the SecurityPolicy's acceptance, no key
// may reach an Object, and nothing of the model may be deleted.
func (sc *scenarios) callerAuth(t *testing.T) {
	c, w := sc.c, sc.w
	key := w.callerKeys("sk-caller-")
	alice, bob, alice2, carol, dave := key("alice"), key("bob"), key("alice-rotated"), key("carol"), key("dave")
	copyName := names.CallerSecret(gatewayXRName, callersSecret)
	copyName2 := names.CallerSecret(gatewayXRName, callersSecret2)

	// Enable: the Secret first, then spec.auth.
	sc.putCallers(t, callersSecret, map[string]any{"alice": alice})
	start := time.Now()
	sc.patchGateway(t, `{"spec":{"auth":{"method":"APIKey","apiKey":{"secretSelector":{"matchLabels":{"`+callersLabel+`":"`+callersLabelTrue+`"}}}}}}`)
	sc.eventually(t, waitRoute, "the callers' keys copied to the gateway cluster", func(ctx context.Context) string {
		return sc.copyHolds(ctx, copyName, map[string]string{"alice": alice})
	})
	sc.eventually(t, waitRoute, "GatewayReady=True with caller auth accepted", func(ctx context.Context) string {
		return sc.gatewayAuthReady(ctx, []string{copyName}, 1)
	})
	t.Logf("caller auth in force %s after spec.auth was set", time.Since(start).Round(time.Millisecond))
	sc.eventually(t, waitRoute, "RoutingReady=True behind caller auth", func(ctx context.Context) string {
		return wantCondition(sc.routeXR(ctx), "RoutingReady", "True")
	})
	sc.noSecretsInObjects(t, "with caller auth on")

	// Rotate alice's key and add bob: the copy follows, GatewayReady stays
	// True throughout.
	since := time.Now()
	sc.putCallers(t, callersSecret, map[string]any{"alice": alice2, "bob": bob})
	sc.eventually(t, waitRotation, "the rotated and added caller keys on the gateway cluster", func(ctx context.Context) string {
		return sc.copyHolds(ctx, copyName, map[string]string{"alice": alice2, "bob": bob})
	})
	t.Logf("the rotated caller key reached the gateway cluster %s after the control plane's changed", time.Since(since).Round(time.Millisecond))
	sc.eventually(t, waitRoute, "status.auth counting two clients", func(ctx context.Context) string {
		return sc.gatewayAuthReady(ctx, []string{copyName}, 2)
	})
	sc.gatewayStayedReady(t, since, "while a caller key was rotated and a client added")

	// A second Secret gives carol bob's key: Envoy Gateway would reject the
	// whole policy, so the function leaves the Secret out and names it.
	since = time.Now()
	sc.putCallers(t, callersSecret2, map[string]any{"carol": bob})
	sc.eventually(t, waitRoute, "GatewayReady naming the unusable callers' Secret", func(ctx context.Context) string {
		gw := sc.gatewayXR(ctx)
		if msg := conditionMessage2(gw, gateway.ConditionType); !strings.Contains(msg, fmt.Sprintf("caller Secret %q is not used", callersSecret2)) {
			return "GatewayReady says: " + msg
		}
		return sc.gatewayAuthReady(ctx, []string{copyName}, 2)
	})
	sc.gatewayStayedReady(t, since, "while a callers' Secret Envoy Gateway cannot use was added")
	// Fixed, it joins the policy.
	sc.putCallers(t, callersSecret2, map[string]any{"carol": carol})
	var lastPolicy string
	sc.eventually(t, waitRoute, "both callers' Secrets in the policy", func(ctx context.Context) string {
		msg := sc.gatewayAuthReady(ctx, []string{copyName, copyName2}, 3)
		if ctx.Err() != nil && lastPolicy != "" {
			// The wait ended during this poll, whose reads were cut
			// short: what the last complete poll saw is the answer.
			return lastPolicy
		}
		lastPolicy = msg
		return msg
	})
	sc.gatewayStayedReady(t, since, "while a callers' Secret was fixed and joined the policy")

	// Someone edits the second Secret's copy on the gateway cluster and
	// gives carol bob's key: Envoy Gateway rejects the whole policy, and
	// GatewayReady says so in its words. (Deleting the copy instead would
	// show the same, but the provider's re-create stores the copied keys in
	// the Object's spec: the known gap docs/limits.md names.) Touching the control-plane
	// Secret makes the provider apply the copy again, forcing its fields
	// back (its version annotation changes).
	_, err := c.dyn.Resource(gvrSecret).Namespace(gatewayNS).Patch(sc.ctx, copyName2, types.MergePatchType,
		[]byte(`{"data":{"carol":"`+bob+`"}}`), metav1.PatchOptions{})
	must(t, err)
	sc.gatewayFalse(t, "a duplicated key in the copy", gatewayready.ReasonCallerAuthNotAccepted, "APIKeyAuth: duplicated API key")
	sc.putCallers(t, callersSecret2, map[string]any{"carol": carol, "dave": dave})
	sc.eventually(t, waitRoute, "GatewayReady=True again once the copy is repaired", func(ctx context.Context) string {
		if s := sc.copyHolds(ctx, copyName2, map[string]string{"carol": carol, "dave": dave}); s != "" {
			return s
		}
		return sc.gatewayAuthReady(ctx, []string{copyName, copyName2}, 4)
	})
	// What Envoy is told: the four callers of both Secrets on every model
	// route, the client's own caller header removed before the forwarded
	// client ID is set, and the caller logged from dynamic metadata.
	sc.readXDS(t, "scenario-5c", all(
		checkCallerAuth([]string{"alice", "bob", "carol", "dave"}),
		checkCallerHeaderRemovedEarly,
		checkCallerLogged,
		checkAIGatewayFilters,
	))

	// Every callers' Secret goes: fail closed, the copies go only once the
	// policy no longer names them, and nothing of the model goes.
	for i, n := range []string{callersSecret, callersSecret2} {
		o := sc.composedObject(sc.ctx, objectNS, gatewayXRName, gateway.PrefixCallerSecret+n)
		if o == nil {
			t.Fatalf("no Object composes the copy of %s", n)
		}
		w.allow(allowance{reason: "scenario 5c deletes the callers' Secret " + n, resource: "secrets", namespace: objectNS, name: n})
		w.allow(allowance{reason: "the copy goes with its Secret", resource: "secrets", namespace: gatewayNS, name: []string{copyName, copyName2}[i]})
		w.allow(allowance{reason: "the copy's Object goes with its Secret", resource: "objects", namespace: objectNS, name: o.GetName()})
	}
	for _, n := range []string{callersSecret, callersSecret2} {
		must(t, c.dyn.Resource(gvrSecret).Namespace(objectNS).Delete(sc.ctx, n, metav1.DeleteOptions{}))
	}
	sc.eventually(t, waitRoute, "GatewayReady=False, CallerSecretsMissing, and a deny-all policy", func(ctx context.Context) string {
		gw := sc.gatewayXR(ctx)
		if r := conditionReason(gw, gateway.ConditionType); r != gatewayready.ReasonCallerSecretsMissing {
			return "GatewayReady reason " + r
		}
		p, err := sc.get(ctx, gvrEGSecurityPolicy, gatewayNS, names.CallerPolicy(gatewayXRName))
		if err != nil {
			return err.Error()
		}
		if a, _, _ := unstructured.NestedString(p.Object, "spec", "authorization", "defaultAction"); a != "Deny" {
			return "the SecurityPolicy does not deny: " + fmt.Sprint(p.Object["spec"])
		}
		return ""
	})
	sc.eventually(t, waitRoute, "the callers' copies gone from the gateway cluster", func(ctx context.Context) string {
		for _, n := range []string{copyName, copyName2} {
			if _, err := sc.get(ctx, gvrSecret, gatewayNS, n); err == nil {
				return n + " is still there"
			}
		}
		return ""
	})
	sc.eventually(t, waitRoute, "RoutingReady=False while every caller is denied", func(ctx context.Context) string {
		return wantCondition(sc.routeXR(ctx), "RoutingReady", "False")
	})
	sc.backendObjectsExist(t, names.BackendObject(routeName, keyedBackend))
	sc.noSecretsInObjects(t, "after the callers' Secrets were removed")

	// Open again, as the scenarios after this one expect.
	w.allow(allowance{reason: "spec.auth removed: the caller-auth policy goes", resource: "securitypolicies", namespace: gatewayNS, name: names.CallerPolicy(gatewayXRName)})
	if o := sc.composedObject(sc.ctx, objectNS, gatewayXRName, gateway.ResourceCallerAuth); o != nil {
		w.allow(allowance{reason: "spec.auth removed: the caller-auth policy's Object goes", resource: "objects", namespace: objectNS, name: o.GetName()})
	}
	sc.patchGateway(t, `{"spec":{"auth":null}}`)
	sc.eventually(t, waitRoute, "GatewayReady=True and the gateway open again", func(ctx context.Context) string {
		gw := sc.gatewayXR(ctx)
		if s := wantCondition(gw, gateway.ConditionType, "True"); s != "" {
			return s
		}
		if m, _, _ := unstructured.NestedString(gw.Object, "status", "auth", "method"); m != "None" {
			return "status.auth.method " + m
		}
		if _, err := sc.get(ctx, gvrEGSecurityPolicy, gatewayNS, names.CallerPolicy(gatewayXRName)); err == nil {
			return "the caller-auth SecurityPolicy is still there"
		}
		return ""
	})
	sc.eventually(t, waitRoute, "RoutingReady=True", func(ctx context.Context) string {
		return wantCondition(sc.routeXR(ctx), "RoutingReady", "True")
	})
	sc.readXDS(t, "scenario-5c-open", all(checkNoCallerAuth, checkCallerHeaderRemovedEarly))
	sc.noDeletions(t)
	w.check(t)
}

// callerKeys returns a maker of callers' API keys, base64 as a Secret holds
// them, unique to this run (prefix, the caller, a stamp), each forbidden
// to appear anywhere the world looks.
func (w *world) callerKeys(prefix string) func(who string) string {
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	return func(who string) string {
		k := base64.StdEncoding.EncodeToString([]byte(prefix + who + "-" + stamp))
		w.forbid("the caller key of "+who, k)
		return k
	}
}

// putCallers creates or replaces a callers' Secret on the control plane.
func (sc *scenarios) putCallers(t *testing.T, name string, data map[string]any) {
	t.Helper()
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := sc.get(sc.ctx, gvrSecret, objectNS, name)
		if err != nil {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": data,
				"metadata": map[string]any{"name": name, "namespace": objectNS, "labels": map[string]any{callersLabel: callersLabelTrue}},
			}}
			_, err = sc.c.dyn.Resource(gvrSecret).Namespace(objectNS).Create(sc.ctx, u, metav1.CreateOptions{})
			return err
		}
		cur.Object["data"] = data
		_, err = sc.c.dyn.Resource(gvrSecret).Namespace(objectNS).Update(sc.ctx, cur, metav1.UpdateOptions{})
		return err
	}))
}

// patchGateway merge-patches the InferenceGateway.
func (sc *scenarios) patchGateway(t *testing.T, patch string) {
	t.Helper()
	_, err := sc.c.dyn.Resource(gvrInferenceGW).Patch(sc.ctx, gatewayXRName, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	must(t, err)
}

// copyHolds returns "" once the gateway cluster's copy of a callers'
// Secret holds exactly want. It never prints a key.
func (sc *scenarios) copyHolds(ctx context.Context, name string, want map[string]string) string {
	s, err := sc.get(ctx, gvrSecret, gatewayNS, name)
	if err != nil {
		return err.Error()
	}
	got, _, _ := unstructured.NestedStringMap(s.Object, "data")
	if !maps.Equal(got, want) {
		return fmt.Sprintf("the copy %s/%s holds client IDs %v, not yet the control plane's %v (or other keys)", gatewayNS, name, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	return ""
}

// gatewayAuthReady returns "" when GatewayReady is True, status.auth
// counts clients, and the SecurityPolicy references exactly refs and is
// accepted by Envoy Gateway for its current generation.
func (sc *scenarios) gatewayAuthReady(ctx context.Context, refs []string, clients int64) string {
	gw := sc.gatewayXR(ctx)
	if s := wantCondition(gw, gateway.ConditionType, "True"); s != "" {
		return s + ": " + conditionMessage2(gw, gateway.ConditionType)
	}
	if n, _, _ := unstructured.NestedInt64(gw.Object, "status", "auth", "clients"); n != clients {
		return fmt.Sprintf("status.auth.clients %d, want %d", n, clients)
	}
	p, err := sc.get(ctx, gvrEGSecurityPolicy, gatewayNS, names.CallerPolicy(gatewayXRName))
	if err != nil {
		return err.Error()
	}
	var got []string
	rs, _, _ := unstructured.NestedSlice(p.Object, "spec", "apiKeyAuth", "credentialRefs")
	for _, r := range rs {
		m, _ := r.(map[string]any)
		n, _ := m["name"].(string)
		got = append(got, n)
	}
	if !slices.Equal(got, refs) {
		return fmt.Sprintf("the SecurityPolicy references %v, want %v", got, refs)
	}
	return acceptedNow(p, "SecurityPolicy")
}

// acceptedNow returns "" when Envoy Gateway has accepted the policy p for
// an ancestor at p's current generation: an Accepted=True left from an
// earlier generation says nothing of the spec now (what names the kind in
// the message).
func acceptedNow(p *unstructured.Unstructured, what string) string {
	anc, _, _ := unstructured.NestedSlice(p.Object, "status", "ancestors")
	for _, a := range anc {
		am, _ := a.(map[string]any)
		conds, _ := am["conditions"].([]any)
		for _, x := range conds {
			cm, _ := x.(map[string]any)
			if cm["type"] == "Accepted" && cm["status"] == "True" && fmt.Sprint(cm["observedGeneration"]) == strconv.FormatInt(p.GetGeneration(), 10) {
				return ""
			}
		}
	}
	return fmt.Sprintf("the %s (generation %d) is not accepted: %v", what, p.GetGeneration(), anc)
}

// gatewayStayedReady fails the test if GatewayReady left True since.
func (sc *scenarios) gatewayStayedReady(t *testing.T, since time.Time, what string) {
	t.Helper()
	gw, _ := sc.w.transitions()
	for _, tr := range gw {
		if tr.at.After(since) && tr.status != "True" {
			t.Errorf("GatewayReady went %s (%s: %s) %s", tr.status, tr.reason, tr.message, what)
		}
	}
}

// conditionMessage2 is a condition's message, or "".
func conditionMessage2(u *unstructured.Unstructured, typ string) string {
	if u == nil {
		return ""
	}
	m, _ := condition(u, typ)["message"].(string)
	return m
}
