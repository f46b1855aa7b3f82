package controlplane

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// What the front door's scenarios (5d, 5e) share with the rest of the
// suite: the second InferenceGateway's name, the changed drain timeout,
// and readers of a gateway's state.

const (
	// secondXRName is the InferenceGateway that tries to take the cluster.
	secondXRName = "second-gateway"
	// drainTimeoutChanged is what scenario 5e sets spec.envoy.drainTimeout
	// to; the function's default is 300s.
	drainTimeoutChanged = "120s"
)

// gatewayState is what must not change on the first gateway while a
// second one comes and goes: its Objects' generations and the
// resourceVersions of what they composed on the gateway cluster.
func (sc *scenarios) gatewayState(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	l, err := sc.c.Dyn.Resource(harness.GVRObject).Namespace(harness.ObjectNS).List(ctx, metav1.ListOptions{LabelSelector: harness.LabelComposite + "=" + harness.GatewayXRName})
	if err != nil {
		return nil, err
	}
	for _, o := range l.Items {
		out["Object "+o.GetAnnotations()[harness.AnnotationResourceName]] = fmt.Sprintf("generation %d", o.GetGeneration())
	}
	for what, key := range map[string]types.NamespacedName{
		"Gateway":    {Namespace: harness.GatewayNS, Name: harness.GatewayXRName},
		"EnvoyProxy": {Namespace: harness.GatewayNS, Name: harness.GatewayXRName},
	} {
		gvr := harness.GVRGateway
		if what == "EnvoyProxy" {
			gvr = harness.GVREnvoyProxy
		}
		u, err := sc.get(ctx, gvr, key.Namespace, key.Name)
		if err != nil {
			return nil, err
		}
		out[what] = fmt.Sprintf("generation %d", u.GetGeneration())
	}
	return out, nil
}

// oldTemplatePodsCounted returns "" once the Envoy Deployment is past
// generation gen, its controller has observed that, and its counters show
// pods of an older template; otherwise what it saw.
func (sc *scenarios) oldTemplatePodsCounted(ctx context.Context, gen int64) string {
	d := sc.envoyDeployment(ctx)
	if d.GetGeneration() <= gen || harness.Int64At(d.Object, "status", "observedGeneration") < d.GetGeneration() {
		return fmt.Sprintf("generation %d, observed %d", d.GetGeneration(), harness.Int64At(d.Object, "status", "observedGeneration"))
	}
	if r, u := harness.Int64At(d.Object, "status", "replicas"), harness.Int64At(d.Object, "status", "updatedReplicas"); r <= u {
		return fmt.Sprintf("replicas %d, updated %d: no old-template pod counted", r, u)
	}
	return ""
}
