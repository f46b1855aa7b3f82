package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/input/v1beta1"
	"github.com/modelplaneai/function-inference-gateway/internal/rollout"
	"github.com/modelplaneai/function-inference-gateway/test/e2e/harness"
)

// TestRenderEnvoyDeploymentCELQuery checks, through the rendered output,
// that the celQuery provider-kubernetes evaluates on the observe-only Envoy
// Deployment is byte for byte the rollout rule the function evaluates
// itself, so the two can never disagree on whether the rollout is done.
// The markers come from the Composition's Input with defaults applied: the
// examples set none, so this is rollout.For of the default markers.
func TestRenderEnvoyDeploymentCELQuery(t *testing.T) {
	checked := 0
	for _, s := range scenarios {
		r := rendered(t, s)
		if r.XR["kind"] != "InferenceGateway" {
			continue
		}
		t.Run(s.ID(), func(t *testing.T) {
			in, err := compositionInput(s.Composition)
			if err != nil {
				t.Fatal(err)
			}
			rule, err := rollout.For(in.WithDefaults().ExtProcMarkerAnnotations)
			if err != nil {
				t.Fatalf("cannot build the rollout rule: %v", err)
			}
			var obj map[string]any
			for _, c := range r.Composed {
				if harness.ResourceName(c) == gateway.ResourceEnvoyDeployment {
					obj = c
				}
			}
			if obj == nil && len(r.Composed) == 0 {
				// A gateway that lost its cluster to another composes nothing.
				t.Skipf("the scenario composes nothing")
			}
			if obj == nil {
				t.Fatalf("the render output has no composed resource %q", gateway.ResourceEnvoyDeployment)
			}
			var readiness struct {
				Policy   string `json:"policy"`
				CELQuery string `json:"celQuery"`
			}
			spec, _ := obj["spec"].(map[string]any)
			if err := fromUnstructured(spec["readiness"], &readiness); err != nil {
				t.Fatal(err)
			}
			// celQuery only counts with this policy.
			if readiness.Policy != "DeriveFromCelQuery" {
				t.Errorf("spec.readiness.policy of %q is %q, want DeriveFromCelQuery", gateway.ResourceEnvoyDeployment, readiness.Policy)
			}
			if diff := cmp.Diff(rule.Expression, readiness.CELQuery); diff != "" {
				t.Errorf("spec.readiness.celQuery of %q is not the rollout rule (-rollout.For +rendered):\n%s", gateway.ResourceEnvoyDeployment, diff)
			}
		})
		checked++
	}
	if checked == 0 {
		t.Fatal("no example scenario renders an InferenceGateway")
	}
}

// compositionInput returns the function's Input from a Composition's
// pipeline, or an empty Input when its step has none.
func compositionInput(path string) (*v1beta1.Input, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the Composition: %w", err)
	}
	var comp struct {
		Spec struct {
			Pipeline []struct {
				Step  string          `json:"step"`
				Input json.RawMessage `json:"input"`
			} `json:"pipeline"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &comp); err != nil {
		return nil, fmt.Errorf("cannot decode the Composition %s: %w", path, err)
	}
	in := &v1beta1.Input{}
	for _, st := range comp.Spec.Pipeline {
		var tm struct{ APIVersion string }
		if len(st.Input) == 0 || json.Unmarshal(st.Input, &tm) != nil || !strings.HasPrefix(tm.APIVersion, "inferencegateway.fn.crossplane.io/") {
			continue
		}
		if err := json.Unmarshal(st.Input, in); err != nil {
			return nil, fmt.Errorf("cannot decode the Input of step %s of %s: %w", st.Step, path, err)
		}
	}
	return in, nil
}

// fromUnstructured converts a decoded JSON value into a typed one.
func fromUnstructured(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("cannot encode %T: %w", in, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("cannot decode into %T: %w", out, err)
	}
	return nil
}
