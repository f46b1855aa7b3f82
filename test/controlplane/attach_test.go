package controlplane

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// parentStatus returns the status.parents entry Envoy Gateway wrote on an
// HTTPRoute for the Gateway ns/name, or nil.
func parentStatus(hr *unstructured.Unstructured, ns, name string) map[string]any {
	parents, _, _ := unstructured.NestedSlice(hr.Object, "status", "parents")
	for _, x := range parents {
		p, _ := x.(map[string]any)
		ref, _ := p["parentRef"].(map[string]any)
		refNS, _ := ref["namespace"].(string)
		if refNS == "" {
			refNS = hr.GetNamespace()
		}
		if p["controllerName"] == harness.EGControllerName && ref["name"] == name && refNS == ns {
			return p
		}
	}
	return nil
}

// parentCondition returns "status (reason)" of a condition in a
// status.parents entry.
func parentCondition(p map[string]any, typ string) string {
	conds, _ := p["conditions"].([]any)
	for _, x := range conds {
		c, _ := x.(map[string]any)
		if c["type"] == typ {
			return fmt.Sprintf("%v (%v)", c["status"], c["reason"])
		}
	}
	return "none"
}
