package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/modelplaneai/function-inference-gateway/test/e2e/harness"
	"github.com/modelplaneai/function-inference-gateway/test/e2e/validate"
)

// xrd is the part of a CompositeResourceDefinition a CRD is made from.
type xrd struct {
	Spec struct {
		Group    string                                        `json:"group"`
		Names    apiextensionsv1.CustomResourceDefinitionNames `json:"names"`
		Scope    string                                        `json:"scope"`
		Versions []struct {
			Name   string `json:"name"`
			Served bool   `json:"served"`
			Schema struct {
				OpenAPIV3Schema apiextensionsv1.JSONSchemaProps `json:"openAPIV3Schema"`
			} `json:"schema"`
		} `json:"versions"`
	} `json:"spec"`
}

// crdOf makes a CRD of an XRD's schemas, as Crossplane does for the part
// that matters here: it copies the spec's and the status' properties, with
// their x-kubernetes-validations, into the CRD it generates (crossplane
// v2.2.0 internal/xcrd/crd.go, genCrdVersion). The fields Crossplane adds
// (spec.crossplane, status.conditions, ...) are left out; the XRs validated
// here do not set them.
func crdOf(t *testing.T, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var x xrd
	if err := yaml.Unmarshal(b, &x); err != nil {
		t.Fatalf("cannot read the XRD %s: %v", path, err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: x.Spec.Names.Plural + "." + x.Spec.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: x.Spec.Group, Names: x.Spec.Names, Scope: apiextensionsv1.ResourceScope(x.Spec.Scope),
		},
	}
	for _, v := range x.Spec.Versions {
		s := v.Schema.OpenAPIV3Schema
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v.Name, Served: v.Served, Storage: true,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &s},
		})
	}
	return crd
}

// TestXRDTransitionRules runs updates of an InferenceGateway through the
// example XRD's rules with the old object as oldSelf, which crossplane beta
// validate cannot do: it validates each resource as created (crossplane
// v2.2.0 cmd/crank/beta/validate/validate.go passes no old object to the
// CEL validator), so transition rules are never run there.
func TestXRDTransitionRules(t *testing.T) {
	v, err := validate.New([]*apiextensionsv1.CustomResourceDefinition{crdOf(t, filepath.Join(harness.ConfigurationDir(h.Examples()), "gateway", harness.FileXRD))})
	if err != nil {
		t.Fatal(err)
	}
	// Numbers are int64, as the API server decodes them.
	xr := func(providerConfig string, replicas int64) map[string]any {
		return map[string]any{
			"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceGateway",
			"metadata": map[string]any{"name": "inference-gateway"},
			"spec":     map[string]any{"providerConfigName": providerConfig, "replicas": replicas},
		}
	}
	ctx := context.Background()
	if _, errs := v.Validate(ctx, xr("gpu-cluster-1", 2)); len(errs) != 0 {
		t.Fatalf("the example XRD rejects a new InferenceGateway: %v", errs.ToAggregate())
	}
	cases := map[string]struct {
		reason   string
		old, new map[string]any
		want     string
	}{
		"OtherField": {
			reason: "Changing another field is allowed.",
			old:    xr("gpu-cluster-1", 2), new: xr("gpu-cluster-1", 3),
		},
		"ProviderConfigName": {
			reason: "Changing providerConfigName is refused, with a message that says what to do.",
			old:    xr("gpu-cluster-1", 2), new: xr("gpu-cluster-2", 2),
			want: `spec.providerConfigName: Invalid value: "gpu-cluster-2": spec.providerConfigName is immutable: to serve another cluster, create another InferenceGateway with that providerConfigName`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := v.ValidateUpdate(ctx, tc.old, tc.new)
			got := ""
			if len(errs) > 0 {
				got = errs.ToAggregate().Error()
			}
			if tc.want == "" {
				if diff := cmp.Diff("", got); diff != "" {
					t.Errorf("%s\nValidateUpdate(...): -want, +got:\n%s", tc.reason, diff)
				}
				return
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("%s\nValidateUpdate(...) = %q, want it to contain %q", tc.reason, got, tc.want)
			}
		})
	}
}
