package validate

import (
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// xrd is the part of a CompositeResourceDefinition a CRD is made from.
type xrd struct {
	Spec struct {
		Group    string                                        `json:"group"`
		Names    apiextensionsv1.CustomResourceDefinitionNames `json:"names"`
		Scope    apiextensionsv1.ResourceScope                 `json:"scope"`
		Versions []struct {
			Name   string `json:"name"`
			Served bool   `json:"served"`
			Schema struct {
				OpenAPIV3Schema apiextensionsv1.JSONSchemaProps `json:"openAPIV3Schema"`
			} `json:"schema"`
		} `json:"versions"`
	} `json:"spec"`
}

// ReadXRD makes a CRD of the XRD in the file at path, as Crossplane does for
// the part that matters to a validator: it copies the spec's and the
// status' properties, with their x-kubernetes-validations, into the CRD it
// generates (crossplane v2.2.0 internal/xcrd/crd.go, genCrdVersion). The
// fields Crossplane adds (spec.crossplane, status.conditions, ...) are left
// out; the XRs the tests validate do not set them.
func ReadXRD(path string) (*apiextensionsv1.CustomResourceDefinition, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the XRD: %w", err)
	}
	var x xrd
	if err := yaml.Unmarshal(b, &x); err != nil {
		return nil, fmt.Errorf("cannot read the XRD %s: %w", path, err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: x.Spec.Names.Plural + "." + x.Spec.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: x.Spec.Group, Names: x.Spec.Names, Scope: x.Spec.Scope,
		},
	}
	for _, v := range x.Spec.Versions {
		s := v.Schema.OpenAPIV3Schema
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v.Name, Served: v.Served, Storage: true,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &s},
		})
	}
	return crd, nil
}
