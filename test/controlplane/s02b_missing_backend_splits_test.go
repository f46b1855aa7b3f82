package controlplane

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// Never a silent weighted split. Envoy Gateway builds one cluster per
// backendRef, and routes by weighted_clusters, when a rule has a backendRef
// it cannot resolve (gateway v1.8.3 internal/ir/xds.go,
// HTTPRoute.NeedsClusterPerSetting: an invalid destination setting's
// weight). AI Gateway recognises only the one-cluster name
// httproute/<ns>/<name>/rule/<i> (ai-gateway v1.0.0
// internal/extensionserver/post_translate_modify.go, maybeModifyCluster),
// so the per-backend clusters get neither the tiers' priorities nor its
// upstream ext_proc. The function therefore adds a backend to a serving
// route only once its Backend exists (internal/route, readBackends). This
// check shows the trap itself against the real controllers, with an
// AIGatewayRoute made by hand in a namespace of its own: should an upgrade
// change what Envoy Gateway or AI Gateway do, it says so.

const (
	// splitProbeNS holds the hand-made route; it carries the team label so
	// that our Gateway's listeners admit it.
	splitProbeNS = "split-probe"
	// splitProbeModel is the model the hand-made route matches.
	splitProbeModel = "split-probe"
	// aiGatewayUpstreamExtProc is the upstream filter AI Gateway puts on
	// each cluster it recognises (ai-gateway v1.0.0
	// internal/extensionserver/post_translate_modify.go,
	// aiGatewayExtProcName).
	aiGatewayUpstreamExtProc = "envoy.filters.http.ext_proc/aigateway"
	// httpProtocolOptions is the key of a cluster's upstream HTTP options.
	httpProtocolOptions = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
	// splitProbeFinalizerWait is how long AI Gateway may take to remove
	// its finalizer from a probe object before the suite does.
	splitProbeFinalizerWait = 30 * time.Second
)

// missingBackendSplits is scenario 2b: a route whose second tier's Backend
// does not exist is served as a weighted split over per-backend clusters
// without priorities or AI Gateway's upstream filter, while our ModelRoute's
// own route still names one cluster with its tiers. It runs on every run,
// like every xDS check; CONTROLPLANE_XDS only adds the dumps.
func (sc *scenarios) missingBackendSplits(t *testing.T) {
	t.Helper()
	ours, err := sc.get(sc.ctx, harness.GVRAIRoute, sc.w.TeamNS, harness.RouteName)
	harness.Must(t, err)
	parents, _, _ := unstructured.NestedSlice(ours.Object, "spec", "parentRefs")

	probe := []probeObject{
		{harness.GVRBackend, map[string]any{
			"apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "Backend",
			"metadata": map[string]any{"name": "present", "namespace": splitProbeNS},
			"spec":     map[string]any{"endpoints": []any{map[string]any{"fqdn": map[string]any{"hostname": "present.example.com", "port": int64(443)}}}},
		}},
		aiServiceBackend("present"),
		// Its Backend "missing" is never created.
		aiServiceBackend("missing"),
		{harness.GVRAIRoute, map[string]any{
			"apiVersion": "aigateway.envoyproxy.io/v1beta1", "kind": "AIGatewayRoute",
			"metadata": map[string]any{"name": "probe", "namespace": splitProbeNS},
			"spec": map[string]any{
				"parentRefs": parents,
				"rules": []any{map[string]any{
					"matches": []any{map[string]any{"headers": []any{map[string]any{"type": "Exact", "name": "x-ai-eg-model", "value": splitProbeModel}}}},
					"backendRefs": []any{
						map[string]any{"name": "present", "priority": int64(0), "weight": int64(1)},
						map[string]any{"name": "missing", "priority": int64(1), "weight": int64(1)},
					},
				}},
			},
		}},
	}
	sc.c.Create(sc.ctx, harness.GVRNamespace, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": splitProbeNS, "labels": map[string]any{names.TeamNamespaceLabel: splitProbeNS}},
	}})
	t.Cleanup(func() { sc.removeSplitProbe(t, probe) })
	for _, p := range probe {
		sc.c.Create(sc.ctx, p.gvr, &unstructured.Unstructured{Object: p.obj})
	}

	model := harness.TeamControlNS + "/" + harness.RouteName
	sc.readXDS(t, "scenario-2b-split", all(
		checkSplit(splitProbeModel, "httproute/"+splitProbeNS+"/probe/rule/0"),
		checkFailover(model, []int64{0, 1}, []int64{429, 503}, int64(v1alpha1.DefaultNumRetries)),
		checkUpstreamExtProc(model),
	))
}

// probeObject is one object of the hand-made route.
type probeObject struct {
	gvr schema.GroupVersionResource
	obj map[string]any
}

// aiServiceBackend is an OpenAI AIServiceBackend in the probe namespace
// for the Backend of the same name.
func aiServiceBackend(name string) probeObject {
	return probeObject{harness.GVRAIBackend, map[string]any{
		"apiVersion": "aigateway.envoyproxy.io/v1beta1", "kind": "AIServiceBackend",
		"metadata": map[string]any{"name": name, "namespace": splitProbeNS},
		"spec": map[string]any{
			"schema":     map[string]any{"name": "OpenAI", "prefix": "/v1"},
			"backendRef": map[string]any{"group": "gateway.envoyproxy.io", "kind": "Backend", "name": name},
		},
	}}
}

// removeSplitProbe deletes the hand-made route's objects and waits until
// they and the HTTPRoute AI Gateway generated are gone, so the scenarios
// after this one see the Gateway's routes as before. The empty namespace
// stays: the suite's kube-controller-manager runs no namespace controller.
// AI Gateway v1.0.0 can lose the removal of its own finalizer
// (aigwfinalizer_test.go); an object it holds past splitProbeFinalizerWait
// gets the operator's workaround, the finalizer removed by hand, and the
// log says so.
func (sc *scenarios) removeSplitProbe(t *testing.T, probe []probeObject) {
	ctx := context.WithoutCancel(sc.ctx)
	for _, r := range []string{harness.GVRBackend.Resource, harness.GVRAIBackend.Resource, harness.GVRAIRoute.Resource, harness.GVRHTTPRoute.Resource} {
		sc.w.Allow(harness.Allowance{Reason: "scenario 2b removes its hand-made route", Resource: r, Namespace: splitProbeNS})
	}
	for _, p := range probe {
		err := sc.c.Dyn.Resource(p.gvr).Namespace(splitProbeNS).Delete(ctx, p.obj["metadata"].(map[string]any)["name"].(string), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cannot delete the probe's %s: %v", p.gvr.Resource, err)
		}
	}
	left := append(slices.Clone(probe), probeObject{harness.GVRHTTPRoute, map[string]any{"metadata": map[string]any{"name": "probe"}}})
	sc.eventually(t, waitSettle, "the split probe's objects to go", func(ctx context.Context) string {
		var there []string
		for _, p := range left {
			name := p.obj["metadata"].(map[string]any)["name"].(string)
			u, err := sc.get(ctx, p.gvr, splitProbeNS, name)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return err.Error()
			}
			there = append(there, p.gvr.Resource+"/"+name)
			if dt := u.GetDeletionTimestamp(); dt != nil && time.Since(dt.Time) > splitProbeFinalizerWait && slices.Contains(u.GetFinalizers(), aiGatewayFinalizer) {
				patch := []byte(`[{"op":"remove","path":"/metadata/finalizers/` + strconv.Itoa(slices.Index(u.GetFinalizers(), aiGatewayFinalizer)) + `"}]`)
				if _, err := sc.c.Dyn.Resource(p.gvr).Namespace(splitProbeNS).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{}); err == nil {
					t.Logf("UPSTREAM %s: AI Gateway held its finalizer on the probe's %s/%s for %s; removed by hand", upstreamFinalizerIssue, p.gvr.Resource, name, time.Since(dt.Time).Round(time.Second))
				}
			}
		}
		if len(there) > 0 {
			return "still there: " + strings.Join(there, ", ")
		}
		return ""
	})
}

// checkSplit: the route of model sends by weight to per-backend clusters
// of the rule (<rule>/backend/<i>) and to Envoy Gateway's
// invalid-backend-cluster, and no per-backend cluster has a priority other
// than 0 or AI Gateway's upstream ext_proc.
func checkSplit(model, rule string) func(xdsDump) string {
	return func(d xdsDump) string {
		r, _ := d.modelRoute(model)
		if r == nil {
			return fmt.Sprintf("no route matches x-ai-eg-model %q yet", model)
		}
		wcs, _, _ := unstructured.NestedSlice(r, "route", "weighted_clusters", "clusters")
		if len(wcs) == 0 {
			return fmt.Sprintf("the route of %q does not split by weight: %v", model, r["route"])
		}
		var got []string
		for _, wc := range wcs {
			n, _ := wc.(map[string]any)["name"].(string)
			got = append(got, n)
		}
		if !slices.Contains(got, "invalid-backend-cluster") {
			return fmt.Sprintf("the route of %q splits across %v, without invalid-backend-cluster", model, got)
		}
		for _, n := range got {
			if n == "invalid-backend-cluster" {
				continue
			}
			if !strings.HasPrefix(n, rule+"/backend/") {
				return fmt.Sprintf("the route of %q splits across %v, not per-backend clusters of %s", model, got, rule)
			}
			c := d.cluster(n)
			if c == nil {
				return fmt.Sprintf("cluster %q is not served yet", n)
			}
			for _, p := range priorities(c) {
				if p != 0 {
					return fmt.Sprintf("cluster %q has locality priorities %v: AI Gateway recognised it", n, priorities(c))
				}
			}
			if upstreamFilters(c)[aiGatewayUpstreamExtProc] {
				return fmt.Sprintf("cluster %q has AI Gateway's upstream ext_proc: AI Gateway recognised it", n)
			}
		}
		return ""
	}
}

// checkUpstreamExtProc: the one cluster the route of model names has AI
// Gateway's upstream ext_proc, which checkSplit finds missing on the
// per-backend clusters.
func checkUpstreamExtProc(model string) func(xdsDump) string {
	return func(d xdsDump) string {
		r, _ := d.modelRoute(model)
		n, _, _ := unstructured.NestedString(r, "route", "cluster")
		c := d.cluster(n)
		if c == nil {
			return fmt.Sprintf("the route of %q names no served cluster (%q)", model, n)
		}
		if !upstreamFilters(c)[aiGatewayUpstreamExtProc] {
			return fmt.Sprintf("cluster %q has upstream filters %v, without AI Gateway's %s", n, upstreamFilters(c), aiGatewayUpstreamExtProc)
		}
		return ""
	}
}

// upstreamFilters names the upstream HTTP filters of a cluster.
func upstreamFilters(c map[string]any) map[string]bool {
	out := map[string]bool{}
	tepo, _ := c["typed_extension_protocol_options"].(map[string]any)
	po, _ := tepo[httpProtocolOptions].(map[string]any)
	fs, _ := po["http_filters"].([]any)
	for _, f := range fs {
		if n, _ := f.(map[string]any)["name"].(string); n != "" {
			out[n] = true
		}
	}
	return out
}
