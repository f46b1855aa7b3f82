package controlplane

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// plainRoute is a ModelRoute of one in-cluster backend at hostname,
// without a key.
func plainRoute(name, hostname string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelRoute",
		"metadata": map[string]any{"name": name, "namespace": harness.TeamControlNS},
		"spec": map[string]any{
			"gatewayName": harness.GatewayXRName,
			"backends": []any{map[string]any{
				"name":     "local",
				"endpoint": map[string]any{"hostname": hostname, "port": int64(8000), "tls": false},
				"schema":   map[string]any{"name": "OpenAI"},
			}},
		},
	}}
}

// allowRouteDeletion permits, by name, the deletions a ModelRoute's own
// deletion brings: the ModelRoute, its Objects, and its route, generated
// HTTPRoute and plainRoute's backend on the gateway cluster, so that
// nothing of another route may go.
func (sc *scenarios) allowRouteDeletion(t *testing.T, name, why string) {
	t.Helper()
	allow := []harness.Allowance{{Reason: why, Resource: "modelroutes", Namespace: harness.TeamControlNS, Name: name}}
	objs, err := sc.c.Dyn.Resource(harness.GVRObject).Namespace(harness.TeamControlNS).List(sc.ctx, metav1.ListOptions{LabelSelector: harness.LabelComposite + "=" + name})
	harness.Must(t, err)
	for _, o := range objs.Items {
		allow = append(allow, harness.Allowance{Reason: why + ": its Objects go with it", Resource: "objects", Namespace: harness.TeamControlNS, Name: o.GetName()})
	}
	for _, r := range []struct{ resource, name string }{
		{"aigatewayroutes", name}, {"httproutes", name},
		{"backends", names.BackendObject(name, "local")}, {"aiservicebackends", names.BackendObject(name, "local")},
	} {
		allow = append(allow, harness.Allowance{Reason: why + ": its objects on the gateway cluster go with it", Resource: r.resource, Namespace: sc.w.TeamNS, Name: r.name})
	}
	for _, a := range allow {
		sc.w.Allow(a)
	}
}

// objectsLeft returns "" when left, the Objects of a deleted composite
// still there, is empty, and otherwise says which are left and why. An
// Object waits for its object on the gateway cluster to go; one AI
// Gateway's lost finalizer removal holds gets the operator's workaround
// (releaseLostFinalizers), anything else still fails the wait. A stuck
// finalizer reads differently from a slow garbage collector.
func (sc *scenarios) objectsLeft(ctx context.Context, t *testing.T, left []unstructured.Unstructured) string {
	t.Helper()
	if len(left) == 0 {
		return ""
	}
	remote := sc.releaseLostFinalizers(ctx, t, left)
	says := make([]string, 0, len(left))
	for _, o := range left {
		syn := harness.Condition(&o, "Synced")
		says = append(says, fmt.Sprintf("%s (%s; deleting since %v; finalizers %v; Synced %v: %v; %s)", o.GetName(),
			o.GetAnnotations()[harness.AnnotationResourceName], o.GetDeletionTimestamp(), o.GetFinalizers(), syn["status"], syn["message"],
			remote[o.GetName()]))
	}
	return fmt.Sprintf("%d Objects left in %s: %s", len(left), harness.TeamControlNS, strings.Join(says, "; "))
}

// deleteRoute deletes the ModelRoute name and waits until it, its Objects
// and its route on the gateway cluster are gone. Waiting only for the
// ModelRoute is not enough: Crossplane deletes a composite without waiting
// for what it composed (its Objects go by the garbage collector, then by
// the provider), and a later scenario's xDS would still find the route, its
// backends gone. An Object held by AI Gateway's lost finalizer removal gets
// the operator's workaround (aigwfinalizer_test.go), as in scenario 6.
func (sc *scenarios) deleteRoute(t *testing.T, name, why string) {
	t.Helper()
	sc.allowRouteDeletion(t, name, why)
	start := time.Now()
	harness.Must(t, sc.c.Dyn.Resource(harness.GVRModelRoute).Namespace(harness.TeamControlNS).Delete(sc.ctx, name, metav1.DeleteOptions{}))
	sc.eventually(t, waitRoute, "the ModelRoute "+name+", its Objects and its route on the gateway cluster gone", func(ctx context.Context) string {
		if _, err := sc.get(ctx, harness.GVRModelRoute, harness.TeamControlNS, name); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("still there (%v)", err)
		}
		l, err := sc.c.Dyn.Resource(harness.GVRObject).Namespace(harness.TeamControlNS).List(ctx, metav1.ListOptions{LabelSelector: harness.LabelComposite + "=" + name})
		if err != nil {
			return err.Error()
		}
		if m := sc.objectsLeft(ctx, t, l.Items); m != "" {
			return m
		}
		for _, gvr := range []schema.GroupVersionResource{harness.GVRAIRoute, harness.GVRHTTPRoute} {
			if _, err := sc.get(ctx, gvr, sc.w.TeamNS, name); !apierrors.IsNotFound(err) {
				return fmt.Sprintf("its %s %s/%s is still there (%v)", gvr.Resource, sc.w.TeamNS, name, err)
			}
		}
		return ""
	})
	t.Logf("the ModelRoute %s, its Objects and its route on the gateway cluster were gone %s after its deletion", name, time.Since(start).Round(time.Millisecond))
}
