package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// pkgDir is package/configuration/, as a path relative to example/.
const pkgDir = "../package/configuration/"

// tree writes files, as paths relative to dir, under dir.
func tree(t *testing.T, dir string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x: 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDiscover(t *testing.T) {
	// Paths under example/, but for the XRD and Composition, which are in
	// package/configuration/ beside it.
	composite := func(name string, extra ...string) []string {
		return append([]string{pkgDir + name + "/xrd.yaml", pkgDir + name + "/composition.yaml", name + "/functions.yaml"}, extra...)
	}
	cases := map[string]struct {
		reason  string
		files   []string
		want    []string // ID: XR, observed, required, relative to the tree
		wantErr string
	}{
		"NoScenarioFolders": {
			reason: "A composite without scenario folders renders its xr.yaml once.",
			files:  composite("gateway", "gateway/xr.yaml"),
			want:   []string{"gateway/default: gateway/xr.yaml, -, -"},
		},
		"Scenarios": {
			reason: "Each subfolder is a scenario; its xr.yaml overrides the composite's; observed and required are optional; dot folders are ignored.",
			files: composite("route", "route/xr.yaml",
				"route/ready/observed.yaml", "route/ready/required.yaml",
				"route/two-tiers/xr.yaml", "route/two-tiers/required.yaml",
				"route/.cache/observed.yaml"),
			want: []string{
				"route/ready: route/xr.yaml, route/ready/observed.yaml, route/ready/required.yaml",
				"route/two-tiers: route/two-tiers/xr.yaml, -, route/two-tiers/required.yaml",
			},
		},
		"SortedAcrossComposites": {
			reason: "Scenarios come sorted by ID.",
			files:  append(composite("route", "route/xr.yaml"), composite("gateway", "gateway/xr.yaml", "gateway/b/observed.yaml", "gateway/a/observed.yaml")...),
			want: []string{
				"gateway/a: gateway/xr.yaml, gateway/a/observed.yaml, -",
				"gateway/b: gateway/xr.yaml, gateway/b/observed.yaml, -",
				"route/default: route/xr.yaml, -, -",
			},
		},
		"NoXR": {
			reason:  "A scenario needs an XR from somewhere.",
			files:   composite("gateway", "gateway/fresh/observed.yaml"),
			wantErr: "neither it nor",
		},
		"NotAComposite": {
			reason:  "A folder of example/ without a Composition is an error, not silently skipped.",
			files:   []string{pkgDir + "gateway/xrd.yaml", "gateway/functions.yaml", "gateway/xr.yaml"},
			wantErr: "composition.yaml is missing",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "example")
			tree(t, dir, tc.files...)
			got, err := Discover(dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nDiscover(...): error %v, want one containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nDiscover(...): %v", tc.reason, err)
			}
			rel := func(p string) string {
				if p == "" {
					return "-"
				}
				r, err := filepath.Rel(dir, p)
				if err != nil {
					t.Fatal(err)
				}
				return filepath.ToSlash(r)
			}
			var ids []string
			for _, s := range got {
				ids = append(ids, s.ID()+": "+rel(s.XR)+", "+rel(s.Observed)+", "+rel(s.Required))
				if rel(s.Composition) != pkgDir+s.Composite+"/composition.yaml" {
					t.Errorf("%s: Composition is %s", s.ID(), s.Composition)
				}
			}
			if diff := cmp.Diff(tc.want, ids); diff != "" {
				t.Errorf("%s\nDiscover(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestRenderArgs(t *testing.T) {
	s := Scenario{Composite: "gateway", Name: "ready", XRD: "/e/xrd.yaml", Composition: "/e/composition.yaml", Functions: "/e/functions.yaml", XR: "/e/xr.yaml", Observed: "/e/ready/observed.yaml"}
	want := []string{
		"render", "/e/xr.yaml", "/e/composition.yaml", "/e/functions.yaml",
		"--xrd=/e/xrd.yaml", "--include-function-results",
		"--observed-resources=/e/ready/observed.yaml",
		"--function-annotations=render.crossplane.io/runtime-development-target=127.0.0.1:1234",
	}
	if diff := cmp.Diff(want, RenderArgs(s, "127.0.0.1:1234")); diff != "" {
		t.Errorf("RenderArgs(...): -want, +got:\n%s", diff)
	}
}

func TestParseRender(t *testing.T) {
	out := `---
apiVersion: modelplane.ai/v1alpha1
kind: InferenceGateway
metadata:
  name: g
---
apiVersion: kubernetes.m.crossplane.io/v1alpha1
kind: Object
metadata:
  annotations:
    crossplane.io/composition-resource-name: gateway
spec:
  replicas: 2
---
apiVersion: render.crossplane.io/v1beta1
kind: Result
message: hello
severity: SEVERITY_WARNING
step: compose
`
	r, err := ParseRender([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if r.XR["kind"] != "InferenceGateway" {
		t.Errorf("ParseRender(...).XR is a %v, want the InferenceGateway", r.XR["kind"])
	}
	if len(r.Composed) != 1 || ResourceName(r.Composed[0]) != "gateway" {
		t.Errorf("ParseRender(...).Composed: %v, want the one Object named gateway", r.Composed)
	}
	// Integers decode as int64, as the API server decodes them.
	if got := r.Composed[0]["spec"].(map[string]any)["replicas"]; got != int64(2) {
		t.Errorf("spec.replicas decoded as %T %v, want int64 2", got, got)
	}
	if diff := cmp.Diff([]Result{{Step: "compose", Severity: "SEVERITY_WARNING", Message: "hello"}}, r.Results); diff != "" {
		t.Errorf("ParseRender(...).Results: -want, +got:\n%s", diff)
	}
}
