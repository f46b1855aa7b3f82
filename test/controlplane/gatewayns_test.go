package controlplane

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// managers lists an object's managedFields entries as manager (operation).
func managers(u *unstructured.Unstructured) []string {
	var out []string
	for _, m := range u.GetManagedFields() {
		out = append(out, fmt.Sprintf("%s (%s)", m.Manager, m.Operation))
	}
	sort.Strings(out)
	return out
}

// gatewayNamespaceByProvider requires the gateway namespace to come into
// being through the function's gateway-namespace Object: that Object,
// composed for the InferenceGateway in objectNS, names the namespace and
// never deletes it (managementPolicies Observe, Create, Update), and the
// namespace, as the world's watch first saw it, carries only that
// Object's server-side apply (provider-kubernetes v1.3.1 syncer.go,
// SyncResource: field manager provider-kubernetes/<Object name>).
func (sc *scenarios) gatewayNamespaceByProvider(t *testing.T) {
	t.Helper()
	var obj *unstructured.Unstructured
	sc.eventually(t, waitSettle, "the gateway namespace, created by provider-kubernetes", func(ctx context.Context) string {
		obj = sc.composedObject(ctx, objectNS, gatewayXRName, resourceGatewayNamespace)
		if obj == nil {
			return fmt.Sprintf("no %s Object of the InferenceGateway in %s", resourceGatewayNamespace, objectNS)
		}
		if _, err := sc.get(ctx, gvrNamespace, "", gatewayNS); err != nil {
			return err.Error()
		}
		sc.w.mu.Lock()
		defer sc.w.mu.Unlock()
		if sc.w.gatewayNS == nil {
			return "the watch has not seen the namespace yet"
		}
		return ""
	})
	kind, _, _ := unstructured.NestedString(obj.Object, "spec", "forProvider", "manifest", "kind")
	name, _, _ := unstructured.NestedString(obj.Object, "spec", "forProvider", "manifest", "metadata", "name")
	if kind != "Namespace" || name != gatewayNS {
		t.Errorf("the %s Object manages %s %q, want Namespace %q", resourceGatewayNamespace, kind, name, gatewayNS)
	}
	policies, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "managementPolicies")
	sort.Strings(policies)
	if want := []string{"Create", "Observe", "Update"}; !slices.Equal(policies, want) {
		t.Errorf("the %s Object's managementPolicies are %v, want %v: the namespace is never deleted", resourceGatewayNamespace, policies, want)
	}
	sc.w.mu.Lock()
	first := *sc.w.gatewayNS
	sc.w.mu.Unlock()
	if want := []string{"provider-kubernetes/" + obj.GetName() + " (Apply)"}; !slices.Equal(first.managers, want) {
		t.Errorf("the gateway namespace %s, when first seen, was written by %v, want only %v", gatewayNS, first.managers, want)
	}
	t.Logf("the gateway namespace %s appeared %.2fs after the InferenceGateway, written by %v", gatewayNS, first.at.Sub(sc.t0).Seconds(), first.managers)
}
