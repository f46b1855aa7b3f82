package e2e

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelplaneai/function-inference-gateway/test/e2e/harness"
)

// TestRenderMalformedXR renders XRs the XRD would reject, and checks that
// the function rejects them too, with its own message. crossplane render
// --xrd only applies the XRD's defaults (structural defaulting, in
// crossplane v2.2.0 cmd/crank/render/xrd.go); it does not validate the XR
// against the schema. So the XR reaches the function as written, as it
// would from a control plane whose XRD is older or looser than the
// function, and the function's Fatal result makes render exit 1.
func TestRenderMalformedXR(t *testing.T) {
	composites, err := harness.Composites(h.Examples())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]harness.Composite{}
	for _, c := range composites {
		byName[c.Name] = c
	}

	cases := map[string]struct {
		composite string
		xr        string
		want      string
	}{
		"MissingProviderConfigName": {
			composite: "gateway",
			xr:        "no-provider-config.yaml",
			want:      "cannot compose InferenceGateway: spec.providerConfigName is required",
		},
		"ReplicasIsAString": {
			composite: "gateway",
			xr:        "replicas-string.yaml",
			want:      "cannot read InferenceGateway: spec.replicas is a JSON string, but must be a whole number",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, ok := byName[tc.composite]
			if !ok {
				t.Fatalf("cannot find the example composite %q", tc.composite)
			}
			xr, err := filepath.Abs(filepath.Join(goldenDir, malformedDir, tc.xr))
			if err != nil {
				t.Fatal(err)
			}
			out, err := h.Render(context.Background(), c.WithXR(name, xr))
			if err != nil {
				t.Fatal(err)
			}
			if out.ExitCode == 0 {
				t.Fatalf("crossplane render of %s exited 0, want non-zero; stdout:\n%s", tc.xr, out.Stdout)
			}
			if !strings.Contains(string(out.Stderr), tc.want) {
				t.Errorf("crossplane render of %s: stderr does not contain %q:\n%s", tc.xr, tc.want, out.Stderr)
			}
			// A failed render prints no partial output.
			if len(bytes.TrimSpace(out.Stdout)) != 0 {
				t.Errorf("crossplane render of %s failed but printed:\n%s", tc.xr, out.Stdout)
			}
		})
	}
}
