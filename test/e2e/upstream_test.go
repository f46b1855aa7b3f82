package e2e

import (
	"context"
	"slices"
	"strings"
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
			known := map[string]bool{}
			for _, obj := range r.Composed {
				errs := v.ValidateComposed(context.Background(), asCreated(obj))
				for _, e := range errs {
					if k, ok := knownRejectionOf(s.ID(), harness.ResourceName(obj), e.Error()); ok {
						known[k.contains] = true
						t.Logf("composed resource %q: the known upstream rejection (%s): %v", harness.ResourceName(obj), k.why, e)
						continue
					}
					t.Errorf("composed resource %q (%s): %v", harness.ResourceName(obj), manifestKind(obj), e)
				}
			}
			for _, k := range knownRejections {
				if slices.Contains(k.scenarios, s.ID()) && !known[k.contains] {
					t.Errorf("the known upstream rejection of %q no longer occurs (%s): remove its row from knownRejections, and the caveat from the docs", k.resource, k.why)
				}
			}
			t.Logf("validated %d composed resources in %s", len(r.Composed), time.Since(start))
		})
	}
}

// A knownRejection is an error the pinned upstream CRDs give, under the
// API server's validation of this module's Kubernetes version, on a
// composed resource that is right by the upstream API: an upstream bug
// that a user meets too. Its row says which scenarios meet it, and each of
// them must still meet it, so a fixed bug fails the test until its row,
// and the docs' caveat, go.
type knownRejection struct {
	scenarios []string
	resource  string
	// contains is part of the error.
	contains string
	// why names the upstream bug and its fix.
	why string
}

// knownRejections are the known upstream rejections. None is known with
// the pinned versions: Envoy Gateway v1.8.1's CRD gave rateLimit rules'
// limit.requests format int32 with a maximum of 4294967295, which
// Kubernetes 1.36 rejects for every value (envoyproxy/gateway issue 9186),
// so every budget was refused; v1.8.2 gave it format int64, and the pin is
// v1.8.3 (api/v1alpha1/ratelimit_types.go, RateLimitValue.Requests).
var knownRejections []knownRejection

// knownRejectionOf finds the known rejection that err, on the composed
// resource of scenario id, is.
func knownRejectionOf(id, resource, err string) (knownRejection, bool) {
	for _, k := range knownRejections {
		if slices.Contains(k.scenarios, id) && k.resource == resource && strings.Contains(err, k.contains) {
			return k, true
		}
	}
	return knownRejection{}, false
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
