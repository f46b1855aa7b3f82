package e2e

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/test/e2e/harness"
	"github.com/modelplaneai/function-inference-gateway/test/e2e/validate"
)

// placeholderUID stands in for the XR's uid in owner references; see
// asCreated.
const placeholderUID = "00000000-0000-4000-8000-000000000000"

// TestComposedResourcesMatchUpstreamCRDs validates every composed resource
// of every example scenario as the API servers would on create: the
// provider-kubernetes Object against the provider's CRD on the control
// plane, and the manifest it carries against the CRD of its kind (or the
// core kind) on the remote cluster. See package validate for the checks.
func TestComposedResourcesMatchUpstreamCRDs(t *testing.T) {
	v := upstreamValidator(t)
	for _, s := range scenarios {
		t.Run(s.ID(), func(t *testing.T) {
			r := rendered(t, s)
			if len(r.Composed) == 0 {
				t.Skipf("%s composes nothing", s.ID())
			}
			start := time.Now()
			for _, obj := range r.Composed {
				errs := v.ValidateComposed(context.Background(), asCreated(obj))
				for _, e := range errs {
					t.Errorf("composed resource %q (%s): %v", harness.ResourceName(obj), manifestKind(obj), e)
				}
			}
			t.Logf("validated %d composed resources in %s", len(r.Composed), time.Since(start))
		})
	}
}

// asCreated returns a copy of a rendered composed resource with what
// Crossplane would have filled in before creating it. crossplane render
// copies the XR's uid into the owner reference, and the example XRs have
// none, so the reference's uid is empty, which the API server rejects
// ("uid must not be empty"). On a control plane the XR has a uid.
func asCreated(obj map[string]any) map[string]any {
	u := unstructured.Unstructured{Object: obj}
	u = *u.DeepCopy()
	refs := u.GetOwnerReferences()
	for i := range refs {
		if refs[i].UID == "" {
			refs[i].UID = placeholderUID
		}
	}
	if refs != nil {
		u.SetOwnerReferences(refs)
	}
	return u.Object
}

// manifestKind names what a composed resource is, for messages: the
// manifest's kind for a provider-kubernetes Object.
func manifestKind(obj map[string]any) string {
	u := unstructured.Unstructured{Object: obj}
	if !validate.IsObject(u.GroupVersionKind()) {
		return u.GetKind()
	}
	m, _, _ := unstructured.NestedMap(obj, "spec", "forProvider", "manifest")
	mu := unstructured.Unstructured{Object: m}
	return "Object of " + mu.GetAPIVersion() + " " + mu.GetKind()
}
