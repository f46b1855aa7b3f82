package controlplane

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
)

// The front door's scenarios: the health route served beside the
// unserved anchor, a second InferenceGateway on the same cluster, and a
// change of an Envoy setting on the live gateway.

const (
	// secondXRName is the InferenceGateway that tries to take the cluster.
	secondXRName = "second-gateway"
	// drainTimeoutChanged is what scenario 5e sets spec.envoy.drainTimeout
	// to; the function's default is 300s.
	drainTimeoutChanged = "120s"
)

var (
	gvrEGSecurityPolicy = schema.GroupVersionResource{Group: "gateway.envoyproxy.io", Version: "v1alpha1", Resource: "securitypolicies"}
	gatewayXRFile       = filepath.Join("example", "gateway", "xr.yaml")
)

// frontDoorServed checks what Envoy Gateway makes of the front door: the health route, in the front-door namespace, is Accepted
// on the http listener with its HTTPRouteFilter resolved, while the
// anchor's HTTPRoute in the gateway namespace stays NotAllowedByListeners.
func (sc *scenarios) frontDoorServed(t *testing.T) {
	t.Helper()
	fd := names.FrontDoorNamespace(gatewayNS)
	health := names.Child(gatewayXRName, names.HealthSuffix)
	sc.eventually(t, waitSettle, "the health route accepted on the http listener", func(ctx context.Context) string {
		hr, err := sc.get(ctx, gvrHTTPRoute, fd, health)
		if err != nil {
			return err.Error()
		}
		p := parentStatus(hr, gatewayNS, gatewayXRName)
		if p == nil {
			return "no status.parents entry for the Gateway"
		}
		if a, r := parentCondition(p, "Accepted"), parentCondition(p, "ResolvedRefs"); a != "True (Accepted)" || r != "True (ResolvedRefs)" {
			return fmt.Sprintf("Accepted=%s, ResolvedRefs=%s", a, r)
		}
		if _, err := sc.get(ctx, gvrEGSecurityPolicy, fd, names.Child(gatewayXRName, names.FrontDoorSuffix)); err != nil {
			return "the front door's SecurityPolicy: " + err.Error()
		}
		return ""
	})
	hr, err := sc.get(sc.ctx, gvrHTTPRoute, gatewayNS, names.AnchorRoute(gatewayXRName))
	if err != nil {
		t.Fatalf("cannot get the anchor's HTTPRoute: %v", err)
	}
	if a := parentCondition(parentStatus(hr, gatewayNS, gatewayXRName), "Accepted"); a != "False (NotAllowedByListeners)" {
		t.Errorf("the anchor's HTTPRoute is Accepted=%s beside the front door; want False (NotAllowedByListeners)", a)
	}
}

// gatewayState is what must not change on the first gateway while a
// second one comes and goes: its Objects' generations and the
// resourceVersions of what they composed on the gateway cluster.
func (sc *scenarios) gatewayState(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	l, err := sc.c.dyn.Resource(gvrObject).Namespace(objectNS).List(ctx, metav1.ListOptions{LabelSelector: labelComposite + "=" + gatewayXRName})
	if err != nil {
		return nil, err
	}
	for _, o := range l.Items {
		out["Object "+o.GetAnnotations()[annotationResourceName]] = fmt.Sprintf("generation %d", o.GetGeneration())
	}
	for what, key := range map[string]types.NamespacedName{
		"Gateway":    {Namespace: gatewayNS, Name: gatewayXRName},
		"EnvoyProxy": {Namespace: gatewayNS, Name: gatewayXRName},
	} {
		gvr := gvrGateway
		if what == "EnvoyProxy" {
			gvr = gvrEnvoyProxy
		}
		u, err := sc.get(ctx, gvr, key.Namespace, key.Name)
		if err != nil {
			return nil, err
		}
		out[what] = fmt.Sprintf("generation %d", u.GetGeneration())
	}
	return out, nil
}

// secondGateway is scenario 5d, after frontDoorServed: a second InferenceGateway on the same
// providerConfigName. It composes nothing, says GatewayReady=False with
// ClusterAlreadyHasGateway naming the first, and nothing of the first
// changes or goes, while the second is created, deleted and recreated.
func (sc *scenarios) secondGateway(t *testing.T) {
	sc.frontDoorServed(t)
	before, err := sc.gatewayState(sc.ctx)
	if err != nil {
		t.Fatal(err)
	}
	sc.w.allow(allowance{reason: "scenario 5d deletes the second InferenceGateway", resource: "inferencegateways", name: secondXRName})
	for round := 1; round <= 2; round++ {
		xr := sc.c.readYAMLFile(gatewayXRFile)[0]
		xr.SetName(secondXRName)
		sc.c.create(sc.ctx, gvrInferenceGW, xr)
		sc.eventually(t, waitSettle, "the second gateway to say ClusterAlreadyHasGateway", func(ctx context.Context) string {
			u, err := sc.get(ctx, gvrInferenceGW, "", secondXRName)
			if err != nil {
				return err.Error()
			}
			if r := conditionReason(u, gateway.ConditionType); conditionStatus(u, gateway.ConditionType) != "False" || r != gateway.ReasonClusterAlreadyHasGateway {
				return fmt.Sprintf("GatewayReady=%s (%s)", conditionStatus(u, gateway.ConditionType), r)
			}
			if msg, _ := condition(u, gateway.ConditionType)["message"].(string); !strings.Contains(msg, `"`+gatewayXRName+`"`) {
				return "the message does not name the winner: " + msg
			}
			// Each records the winner in status.clusterGateway, which
			// the XRD must keep (Crossplane prunes a status field the
			// schema lacks).
			if got, _, _ := unstructured.NestedString(u.Object, "status", "clusterGateway"); got != gatewayXRName {
				return fmt.Sprintf("the second gateway's status.clusterGateway is %q, want %q", got, gatewayXRName)
			}
			first := sc.gatewayXR(ctx)
			if first == nil {
				return "the first gateway is not found"
			}
			if got, _, _ := unstructured.NestedString(first.Object, "status", "clusterGateway"); got != gatewayXRName {
				return fmt.Sprintf("the first gateway's status.clusterGateway is %q, want its own name (its claim)", got)
			}
			return ""
		})
		if round == 1 {
			sc.routeOnLostGateway(t)
		}
		// A few of the second gateway's reconciles: it must stay empty.
		time.Sleep(5 * time.Second)
		if l, err := sc.c.dyn.Resource(gvrObject).Namespace(objectNS).List(sc.ctx, metav1.ListOptions{LabelSelector: labelComposite + "=" + secondXRName}); err != nil || len(l.Items) > 0 {
			t.Errorf("round %d: the second gateway composed %d Objects (%v); want none", round, len(l.Items), err)
		}
		if w := wantCondition(sc.gatewayXR(sc.ctx), gateway.ConditionType, "True"); w != "" {
			t.Errorf("round %d: the first gateway is no longer GatewayReady: %s", round, w)
		}
		after, err := sc.gatewayState(sc.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(before) != fmt.Sprint(after) {
			t.Errorf("round %d: the first gateway changed: before %v, after %v", round, before, after)
		}
		if err := sc.c.dyn.Resource(gvrInferenceGW).Delete(sc.ctx, secondXRName, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("cannot delete the second gateway: %v", err)
		}
		sc.eventually(t, waitSettle, "the second gateway to be gone", func(ctx context.Context) string {
			if _, err := sc.get(ctx, gvrInferenceGW, "", secondXRName); !apierrors.IsNotFound(err) {
				return fmt.Sprintf("still there (%v)", err)
			}
			return ""
		})
	}
	if w := wantCondition(sc.gatewayXR(sc.ctx), gateway.ConditionType, "True"); w != "" {
		t.Errorf("the first gateway after the second went: %s", w)
	}
	sc.noDeletions(t)
	sc.w.check(t)
}

// envoySettingChanged is scenario 5e: spec.envoy.drainTimeout changes on
// the live gateway. The EnvoyProxy changes, Envoy Gateway changes the pod
// template (a termination grace period of the drain timeout plus 300 s:
// gateway v1.8.3 internal/infrastructure/kubernetes/proxy/
// resource_provider.go, expectedTerminationGracePeriodSeconds), and the Deployment rolls: GatewayReady is
// False while old-template pods serve and True after, the model's route
// stays composed throughout, and RoutingReady comes back.
func (sc *scenarios) envoySettingChanged(t *testing.T) {
	s := sc.s
	gen := sc.envoyDeployment(sc.ctx).GetGeneration()
	s.kubelet.setHold(true)
	patch := fmt.Sprintf(`{"spec":{"envoy":{"drainTimeout":%q}}}`, drainTimeoutChanged)
	if _, err := sc.c.dyn.Resource(gvrInferenceGW).Patch(sc.ctx, gatewayXRName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("cannot change spec.envoy.drainTimeout: %v", err)
	}
	sc.eventually(t, waitSettle, "the EnvoyProxy's new drain timeout and old-template pods", func(ctx context.Context) string {
		ep, err := sc.get(ctx, gvrEnvoyProxy, gatewayNS, gatewayXRName)
		if err != nil {
			return err.Error()
		}
		if d, _, _ := unstructured.NestedString(ep.Object, "spec", "shutdown", "drainTimeout"); d != drainTimeoutChanged {
			return "EnvoyProxy drainTimeout " + d
		}
		return sc.oldTemplatePodsCounted(ctx, gen)
	})
	if st := sc.agree(t); st != "False" {
		t.Fatalf("GatewayReady=%s while the Deployment controller counts old-template pods", st)
	}
	sc.routeComposed(t)
	s.kubelet.setHold(false)
	sc.eventually(t, waitSettle, "GatewayReady=True", func(ctx context.Context) string {
		return wantCondition(sc.gatewayXR(ctx), gateway.ConditionType, "True")
	})
	if st := sc.agree(t); st != "True" {
		t.Errorf("settled GatewayReady=%s after the rollout, want True", st)
	}
	if g, _, _ := unstructured.NestedInt64(sc.envoyDeployment(sc.ctx).Object, "spec", "template", "spec", "terminationGracePeriodSeconds"); g != 420 {
		t.Errorf("the template's terminationGracePeriodSeconds is %d, want 120 + 300", g)
	}
	sc.routeComposed(t)
	sc.eventually(t, waitRoute, "RoutingReady=True again", func(ctx context.Context) string {
		return wantCondition(sc.routeXR(ctx), "RoutingReady", "True")
	})
	sc.noDeletions(t)
	sc.w.check(t)
}

// oldTemplatePodsCounted returns "" once the Envoy Deployment is past
// generation gen, its controller has observed that, and its counters show
// pods of an older template; otherwise what it saw.
func (sc *scenarios) oldTemplatePodsCounted(ctx context.Context, gen int64) string {
	d := sc.envoyDeployment(ctx)
	if d.GetGeneration() <= gen || int64At(d.Object, "status", "observedGeneration") < d.GetGeneration() {
		return fmt.Sprintf("generation %d, observed %d", d.GetGeneration(), int64At(d.Object, "status", "observedGeneration"))
	}
	if r, u := int64At(d.Object, "status", "replicas"), int64At(d.Object, "status", "updatedReplicas"); r <= u {
		return fmt.Sprintf("replicas %d, updated %d: no old-template pod counted", r, u)
	}
	return ""
}

// routeComposed fails the test unless the model's AIGatewayRoute and its
// Object are there.
func (sc *scenarios) routeComposed(t *testing.T) {
	t.Helper()
	if _, err := sc.get(sc.ctx, gvrAIRoute, sc.w.teamNS, routeName); err != nil {
		t.Errorf("the model's AIGatewayRoute: %v", err)
	}
	if sc.composedObject(sc.ctx, teamControlNS, routeName, "route") == nil {
		t.Errorf("the model's route Object is gone")
	}
}
