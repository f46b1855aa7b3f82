package v1alpha1_test

import (
	"path/filepath"
	"sort"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/xrd"
	"github.com/modelplaneai/function-inference-gateway/test/e2e/validate"
)

// The generated XRDs, read the way the tests of this package need them.

// configuration is the Configuration package's folder, from this package's.
var configuration = filepath.Join("..", "..", "..", "package", "configuration")

// crdOf is the CRD Crossplane makes of package/configuration/<dir>/xrd.yaml
// (validate.ReadXRD), for the validator of test/e2e/validate and for the
// schema walks.
func crdOf(t *testing.T, dir string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd, err := validate.ReadXRD(filepath.Join(configuration, dir, xrd.FileXRD))
	if err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("the XRD of %s has %d versions, want 1", dir, len(crd.Spec.Versions))
	}
	return crd
}

// rootSchema is the XRD's one version's schema.
func rootSchema(t *testing.T, dir string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	return *crdOf(t, dir).Spec.Versions[0].Schema.OpenAPIV3Schema
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
