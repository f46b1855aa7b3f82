package controlplane

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
)

// The 100-route test's size, its shared API key's Secret, and the
// variable that runs it.
const (
	scale100Env    = "CONTROLPLANE_SCALE100"
	scale100Routes = 100
	scale100Secret = "shared-key"
)

// TestScale100 puts 100 ModelRoutes, each of an in-cluster backend and a
// keyed hosted one in two priority tiers, on one InferenceGateway, then
// rolls the gateway's Envoy pods, holding the new ones as scenario 7 does
// (followRollout: every route must follow the held outage down and back
// up, and no stale False may outlive staleFalseBound), and records, under
// "scale-100" in $CONTROLPLANE_TIMELINE, how long the gateway was not
// ready, how long the last route took to be RoutingReady again after
// GatewayReady, the stale Falses, and the API server's writes at rest and
// during the rollout, by client. It starts its own control plane: the
// scenarios of TestControlPlane run on one gateway of a few routes, and
// this load would slow every one of them. make controlplane-scale runs it.
func TestScale100(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole control plane and 100 ModelRoutes")
	}
	// Left out of the slow suites' go test, where it would share the
	// cores with the other packages' tests and measure them too: CI
	// (.ci/run) runs it on its own afterwards, as make controlplane-scale
	// does.
	if os.Getenv(scale100Env) == "" {
		t.Skipf("set %s=1 (make controlplane-scale) to run it; .ci/run runs it after the slow suites", scale100Env)
	}
	sc := bringUp(t)
	defer sc.sp.write(t)
	c, w := sc.c, sc.w

	c.apply(sc.ctx, c.readYAMLFile(filepath.Join("example", "gateway", "xr.yaml"))...)
	sc.eventually(t, waitSettle, "GatewayReady=True", func(ctx context.Context) string {
		return wantCondition(sc.gatewayXR(ctx), gateway.ConditionType, "True")
	})

	key := base64.StdEncoding.EncodeToString([]byte("sk-shared-" + fmt.Sprint(time.Now().UnixNano())))
	w.forbid("the shared API key", key)
	c.apply(sc.ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": scale100Secret, "namespace": teamControlNS},
		"type":     "Opaque", "data": map[string]any{apiKeyField: key},
	}})
	created, cpu := time.Now(), c.ps.cpu()
	names := make([]string, scale100Routes)
	for i := range names {
		names[i] = fmt.Sprintf("model-%03d", i)
		c.apply(sc.ctx, keyedRoute(names[i], fmt.Sprintf("m%03d.%s.svc.cluster.local", i, teamControlNS), scale100Secret))
	}
	sc.allRouting(t, "scale-100", names, created)
	t.Logf("CPU from the routes' creation until all routed: %s", c.ps.cpu().since(cpu))
	sc.followRollout(t, "scale-100", names, created, extProcImage+"-upgrade.100")
	sc.allAccepted(t, "scale-100")
	w.check(t)
	obs, viol := w.sidecarSummary()
	t.Logf("sidecar invariant: %d observations, %d violations", obs, viol)
	t.Logf("UPSTREAM crossplane/crossplane#7062: conditions Crossplane re-applied from its cache, not judged as verdicts: %s", replaySummary(w.replaysSeen()))
}

// hostedBackend names keyedRoute's keyed backend.
const hostedBackend = "hosted"

// keyedRoute is a ModelRoute of an in-cluster backend at hostname without
// a key, and a hosted one, its fallback, with the API key in the Secret
// named secret.
func keyedRoute(name, hostname, secret string) *unstructured.Unstructured {
	r := plainRoute(name, hostname)
	spec := r.Object["spec"].(map[string]any)
	spec["backends"] = append(spec["backends"].([]any), map[string]any{
		"name":     hostedBackend,
		"endpoint": map[string]any{"hostname": "openrouter.ai"},
		"schema":   map[string]any{"name": "OpenAI", "prefix": "/api/v1"},
		"priority": int64(1),
		"apiKey":   map[string]any{"secretRef": map[string]any{"name": secret, "key": apiKeyField}},
	})
	return r
}
