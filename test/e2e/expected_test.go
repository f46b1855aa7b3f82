package e2e

import (
	"testing"

	"github.com/modelplaneai/function-inference-gateway/test/e2e/harness"
)

// TestRenderExpected checks every example scenario against its
// expected.yaml: the XR's Ready and the function's own condition, as
// rendered by the real crossplane CLI. A scenario that says it is ready
// must render a Ready composite, not only a True condition.
func TestRenderExpected(t *testing.T) {
	for _, s := range scenarios {
		t.Run(s.ID(), func(t *testing.T) {
			if s.Expected == "" {
				t.Fatalf("scenario %s has no %s: say what its XR reports (ready, and the function's condition)", s.ID(), harness.FileExpected)
			}
			want, err := harness.ReadExpected(s.Expected)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range want.Disagreements(rendered(t, s)) {
				t.Errorf("%s: %s", s.ID(), d)
			}
		})
	}
}
