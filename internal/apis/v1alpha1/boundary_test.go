package v1alpha1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/modelplaneai/function-inference-gateway/test/e2e/validate"
)

// A bound is one value fed to both validations of a composite's spec: the
// Go Validate, and the generated XRD's schema with its CEL rules through
// test/e2e/validate. Both must give the verdict the row says. Where they
// differ on purpose, why says so; a row whose verdicts differ without a
// reason fails.
type bound struct {
	// set are the fields to set on the row's base spec, by path under the
	// spec (dots, and [0] for an array's first item); nil deletes.
	set map[string]any
	// goOK and schemaOK are the verdicts of Validate and of the schema.
	goOK, schemaOK bool
	// why says why the two differ.
	why string
}

// checkBounds runs each row through both validations. base returns a new
// valid spec; goValid decodes a spec as ReadSpec does and validates it.
func checkBounds(t *testing.T, dir, kind string, base func() map[string]any, goValid func([]byte) error, rows map[string]bound) {
	t.Helper()
	v, err := validate.New([]*apiextensionsv1.CustomResourceDefinition{crdOf(t, dir)})
	if err != nil {
		t.Fatal(err)
	}
	for name, row := range rows {
		t.Run(name, func(t *testing.T) {
			if row.goOK != row.schemaOK && row.why == "" {
				t.Fatal("the row expects Validate and the schema to differ, but does not say why")
			}
			spec := base()
			for p, val := range row.set {
				setPath(t, spec, p, val)
			}
			b, err := json.Marshal(spec)
			if err != nil {
				t.Fatal(err)
			}
			gerr := goValid(b)
			if (gerr == nil) != row.goOK {
				t.Errorf("Validate(%s): %v, want ok=%t", b, gerr, row.goOK)
			}
			// Numbers as the API server decodes them: int64 or float64.
			var decoded map[string]any
			if err := json.Unmarshal(b, &decoded); err != nil {
				t.Fatal(err)
			}
			xr := map[string]any{
				"apiVersion": "modelplane.ai/v1alpha1", "kind": kind,
				"metadata": map[string]any{"name": "x", "namespace": "default"},
				"spec":     intsOf(decoded),
			}
			if dir == "gateway" {
				delete(xr["metadata"].(map[string]any), "namespace")
			}
			_, errs := v.Validate(context.Background(), xr)
			if (len(errs) == 0) != row.schemaOK {
				t.Errorf("the %s XRD's schema on %s: %v, want ok=%t", dir, b, errs.ToAggregate(), row.schemaOK)
			}
		})
	}
}

// intsOf turns whole float64s into int64s, as the API server decodes JSON
// numbers.
func intsOf(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = intsOf(e)
		}
	case []any:
		for i, e := range x {
			x[i] = intsOf(e)
		}
	case float64:
		if x == float64(int64(x)) {
			return int64(x)
		}
	}
	return v
}

// setPath sets, or with nil deletes, the field at path (a.b, a[0].b) in m,
// making the objects on the way.
func setPath(t *testing.T, m map[string]any, path string, v any) {
	t.Helper()
	parts := strings.Split(path, ".")
	cur := m
	for i, p := range parts {
		last := i == len(parts)-1
		name, idx, isItem := strings.Cut(p, "[")
		if isItem {
			var n int
			if _, err := fmt.Sscanf(idx, "%d]", &n); err != nil {
				t.Fatalf("bad path %q", path)
			}
			l, _ := cur[name].([]any)
			for len(l) <= n {
				l = append(l, map[string]any{})
			}
			cur[name] = l
			if last {
				l[n] = v
				return
			}
			cur = l[n].(map[string]any)
			continue
		}
		if last {
			if v == nil {
				delete(cur, name)
				return
			}
			cur[name] = v
			return
		}
		next, ok := cur[name].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[name] = next
		}
		cur = next
	}
}

// Helpers for the rows.

// long is a DNS-name-like string of n characters.
func long(n int) string { return strings.Repeat("a", n) }

// labels are n distinct labels.
func labels(n int) map[string]any {
	out := map[string]any{}
	for i := range n {
		out[fmt.Sprintf("l%d", i)] = "v"
	}
	return out
}

// seq is n values from first on.
func seq(first, n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = first + i
	}
	return out
}
