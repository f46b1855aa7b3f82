package harness

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// StartGatewayCluster starts another API server, with its own etcd and
// controller manager, as a second gateway cluster, and makes it the
// ClusterProviderConfig name on the control plane c: the same
// ClusterProviderConfig as deploy/control-plane/providerconfig.yaml but for
// its name and its Secret's, holding a kubeconfig for the least-privilege
// identity deploy/gateway-cluster-rbac.yaml gives provider-kubernetes there,
// as on the first. It carries the CRDs of every composed kind, so the API
// server validates what is composed there against the upstream schemas.
// No Envoy Gateway or AI Gateway runs against it: a gateway composed there
// is never GatewayReady, and what it shows is where and how things are
// composed. Its processes stop with tb.
func (c *Cluster) StartGatewayCluster(ctx context.Context, tb testing.TB, name string) *Cluster {
	tb.Helper()
	g := StartCluster(ctx, tb, c.root, c.Bins, c.controllers)
	g.InstallCRDs(ctx, c.providerWebhook)
	g.Namespace(ctx, EnvoyGatewayNS)
	user, token := g.gatewayIdentity(ctx)

	cpcs := c.ReadYAMLFile(providerConfigFile)
	if len(cpcs) != 1 {
		tb.Fatalf("cannot use %s: want one ClusterProviderConfig, found %d", providerConfigFile, len(cpcs))
	}
	cpc := cpcs[0]
	ref, _, err := unstructured.NestedStringMap(cpc.Object, "spec", "credentials", "secretRef")
	Must(tb, err)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: ref["name"] + "-" + name, Namespace: ref["namespace"]},
		Data:       map[string][]byte{ref["key"]: g.kubeconfigFor(fmt.Sprintf("https://127.0.0.1:%d", g.apiPort), user, token)},
	}
	c.createTyped(ctx, GVRSecret, secret, "v1", "Secret")
	cpc.SetName(name)
	Must(tb, unstructured.SetNestedField(cpc.Object, secret.Name, "spec", "credentials", "secretRef", "name"))
	c.Apply(ctx, cpc)
	tb.Logf("gateway cluster %s: an API server on 127.0.0.1:%d, reached by provider-kubernetes as %s", name, g.apiPort, user)
	return g
}
