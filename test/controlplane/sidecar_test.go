package controlplane

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// markerWrites counts the changes that wrote key on the Envoy Deployment
// after the n-th change.
func markerWrites(ms []harness.MarkerChange, key string) int {
	n := 0
	for i := 1; i < len(ms); i++ {
		if ms[i].Values[key] != "" && ms[i].Values[key] != ms[i-1].Values[key] {
			n++
		}
	}
	if len(ms) > 0 && ms[0].Values[key] != "" {
		n++
	}
	return n
}

// podsHaveSidecar checks that every live Envoy pod of the gateway has the
// ext-proc sidecar with the given image.
func (sc *scenarios) podsHaveSidecar(t *testing.T, image string) {
	t.Helper()
	pods, err := sc.c.Dyn.Resource(harness.GVRPod).Namespace(harness.EnvoyGatewayNS).List(sc.ctx, metav1.ListOptions{LabelSelector: harness.LabelOwningGatewayName + "=" + harness.GatewayXRName})
	harness.Must(t, err)
	if len(pods.Items) == 0 {
		t.Errorf("no Envoy pod of the gateway")
	}
	for i := range pods.Items {
		p := &corev1.Pod{}
		harness.Must(t, harness.FromUnstructured(&pods.Items[i], p))
		if p.DeletionTimestamp != nil {
			continue
		}
		got := ""
		if c := harness.Sidecar(p); c != nil {
			got = c.Image
		}
		if got != image {
			t.Errorf("Envoy pod %s has sidecar image %q, want %q", p.Name, got, image)
		}
	}
}

// filterConfigSecret is AI Gateway's filter-config Secret for the suite's
// gateway, in Envoy Gateway's namespace (ai-gateway v1.0.0
// internal/controller/ai_gateway_route.go, FilterConfigSecretPerGatewayName:
// "<gateway>-<gateway namespace>").
var filterConfigSecret = harness.GatewayXRName + "-" + harness.GatewayNS
