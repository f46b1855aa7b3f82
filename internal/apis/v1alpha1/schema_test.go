package v1alpha1_test

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/modelplaneai/function-inference-gateway/internal/xrd"
)

// The generated XRDs, read the way the tests of this package need them.

// configuration is the Configuration package's folder, from this package's.
var configuration = filepath.Join("..", "..", "..", "package", "configuration")

// readXRD reads package/configuration/<dir>/xrd.yaml.
func readXRD(t *testing.T, dir string) *xrd.XRD {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(configuration, dir, xrd.FileXRD))
	if err != nil {
		t.Fatal(err)
	}
	x := &xrd.XRD{}
	if err := yaml.Unmarshal(b, x); err != nil {
		t.Fatalf("cannot read the XRD of %s: %v", dir, err)
	}
	if len(x.Spec.Versions) != 1 {
		t.Fatalf("the XRD of %s has %d versions, want 1", dir, len(x.Spec.Versions))
	}
	return x
}

// rootSchema is the XRD's one version's schema.
func rootSchema(t *testing.T, dir string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	return readXRD(t, dir).Spec.Versions[0].Schema.OpenAPIV3Schema
}

// crdOf makes a CRD of an XRD's schema, as Crossplane does for the spec's
// and the status' properties (crossplane v2.2.0 internal/xcrd/crd.go,
// genCrdVersion), for the validator of test/e2e/validate.
func crdOf(t *testing.T, dir string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	x := readXRD(t, dir)
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
	return crd
}

// walk calls fn for every field under s, depth first in name order, with
// its path from s: properties joined by dots, and [] for an array's items
// (backends[].name). A field's children are its properties, or its items'
// properties.
func walk(s apiextensionsv1.JSONSchemaProps, path string, fn func(path string, s apiextensionsv1.JSONSchemaProps)) {
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := n
		if path != "" {
			p = path + "." + n
		}
		c := s.Properties[n]
		fn(p, c)
		walk(c, p, fn)
		if c.Items != nil && c.Items.Schema != nil {
			walk(*c.Items.Schema, p+"[]", fn)
		}
	}
}

// leaf reports whether a field has no fields under it: not an object with
// properties, nor an array of such objects.
func leaf(s apiextensionsv1.JSONSchemaProps) bool {
	if len(s.Properties) > 0 {
		return false
	}
	return s.Items == nil || s.Items.Schema == nil || len(s.Items.Schema.Properties) == 0
}
