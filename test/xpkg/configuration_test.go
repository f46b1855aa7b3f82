package xpkg

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/test/internal/manifests"
)

// testedCrossplane is the Crossplane range both packages declare: the
// control-plane suite runs Crossplane v2.3.0 and v2.2.0, the render tests
// v2.2.0.
const testedCrossplane = ">=v2.2.0"

// The packages the Configuration depends on, at the lowest versions the
// suites prove: the control-plane suite runs provider-kubernetes v1.4.1 and,
// with CONTROLPLANE_CONTROLLERS=older, v1.3.1.
const (
	functionPackage = "xpkg.crossplane.io/modelplaneai/function-inference-gateway"
	providerPackage = "xpkg.crossplane.io/crossplane-contrib/provider-kubernetes"
)

// dependency is one entry of a package's spec.dependsOn.
type dependency struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Package    string `json:"package"`
	Version    string `json:"version"`
}

// testConfiguration reads the Configuration package back with crossplane
// xpkg extract and checks what it holds: its metadata, and the XRDs and
// Compositions of package/configuration, as they are in the repository.
func testConfiguration(t *testing.T, root, xp, pkg string) {
	t.Helper()
	objs := extract(t, xp, pkg)

	var got []objectID
	byID := map[objectID]*unstructured.Unstructured{}
	for _, o := range objs {
		id := objectID{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName()}
		got = append(got, id)
		byID[id] = o
	}
	want := []objectID{
		{APIVersion: "meta.pkg.crossplane.io/v1", Kind: "Configuration", Name: "configuration-inference-gateway"},
		{APIVersion: "apiextensions.crossplane.io/v1", Kind: "Composition", Name: "inferencegateways.modelplane.ai"},
		{APIVersion: "apiextensions.crossplane.io/v2", Kind: "CompositeResourceDefinition", Name: "inferencegateways.modelplane.ai"},
		{APIVersion: "apiextensions.crossplane.io/v1", Kind: "Composition", Name: "modelroutes.modelplane.ai"},
		{APIVersion: "apiextensions.crossplane.io/v2", Kind: "CompositeResourceDefinition", Name: "modelroutes.modelplane.ai"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("the Configuration package's objects: -want, +got:\n%s", diff)
	}

	meta := objs[0]
	var deps []dependency
	if err := decodeField(meta, &deps, "spec", "dependsOn"); err != nil {
		t.Fatal(err)
	}
	version, _, _ := unstructured.NestedString(meta.Object, "spec", "crossplane", "version")
	cases := map[string]struct {
		reason    string
		got, want any
	}{
		"DependsOn": {
			reason: "The Configuration installs the function and provider-kubernetes, at least at the versions the suites prove.",
			got:    deps,
			want: []dependency{
				{APIVersion: "pkg.crossplane.io/v1", Kind: "Function", Package: functionPackage, Version: ">=v0.1.0"},
				{APIVersion: "pkg.crossplane.io/v1", Kind: "Provider", Package: providerPackage, Version: ">=v1.3.1"},
			},
		},
		"CrossplaneVersion": {
			reason: "The Configuration declares the Crossplane range the suites test.",
			got:    version, want: testedCrossplane,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}

	// The package holds the repository's files, the ones the render tests
	// and the control-plane suite use, unchanged. crossplane xpkg build
	// writes each object back from Crossplane's types, which adds an
	// empty status to an XRD: only what the files say is compared.
	for _, kind := range []string{"gateway", "route"} {
		for _, f := range []string{"xrd.yaml", "composition.yaml"} {
			t.Run(kind+"/"+f, func(t *testing.T) {
				files := readObjects(t, filepath.Join(root, "package", "configuration", kind, f))
				if len(files) != 1 {
					t.Fatalf("package/configuration/%s/%s holds %d objects, want 1", kind, f, len(files))
				}
				want := files[0]
				got, ok := byID[objectID{APIVersion: want.GetAPIVersion(), Kind: want.GetKind(), Name: want.GetName()}]
				if !ok {
					t.Fatalf("the package has no %s %s", want.GetKind(), want.GetName())
				}
				if diff := cmp.Diff(want.Object, withoutStatus(got).Object); diff != "" {
					t.Errorf("the package's %s %s differs from package/configuration/%s/%s: -repository, +package:\n%s", want.GetKind(), want.GetName(), kind, f, diff)
				}
			})
		}
	}

	// A Composition reaches the function by the name the Function has
	// once installed. crossplane xpkg install and the dependency resolver
	// both name a package after its repository made a DNS label
	// (crossplane v2.2.0 internal/xpkg/name.go, ToDNSLabel): for a
	// repository of lower-case letters, digits and dashes, its slashes
	// become dashes.
	repo := strings.TrimPrefix(functionPackage, "xpkg.crossplane.io/")
	installed := strings.ReplaceAll(repo, "/", "-")
	for id, o := range byID {
		if id.Kind != "Composition" {
			continue
		}
		t.Run("FunctionRef/"+id.Name, func(t *testing.T) {
			steps, _, err := unstructured.NestedSlice(o.Object, "spec", "pipeline")
			if err != nil || len(steps) == 0 {
				t.Fatalf("the Composition has no pipeline: %v", err)
			}
			for _, s := range steps {
				name, _, _ := unstructured.NestedString(s.(map[string]any), "functionRef", "name")
				if diff := cmp.Diff(installed, name); diff != "" {
					t.Errorf("functionRef.name must be the name %s installs as: -want, +got:\n%s", functionPackage, diff)
				}
			}
		})
	}
}

// withoutStatus returns a copy of o without its status.
func withoutStatus(o *unstructured.Unstructured) *unstructured.Unstructured {
	c := o.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "status")
	return c
}

// extract runs crossplane xpkg extract on a package file and returns the
// objects of the package.yaml stream it writes.
func extract(t *testing.T, xp, pkg string) []*unstructured.Unstructured {
	t.Helper()
	out := filepath.Join(t.TempDir(), "package.gz")
	if b, err := exec.Command(xp, "xpkg", "extract", "--from-xpkg", pkg, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("crossplane xpkg extract: %v\n%s", err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("cannot read %s: %v", out, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("cannot read %s: %v", out, err)
	}
	return decodeObjects(t, b)
}

// readObjects returns the objects of a YAML file.
func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decodeObjects(t, b)
}

// decodeObjects decodes a YAML stream, skipping empty documents.
func decodeObjects(t *testing.T, b []byte) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifests.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// decodeField decodes the field of o at path into into.
func decodeField(o *unstructured.Unstructured, into any, path ...string) error {
	v, _, err := unstructured.NestedFieldNoCopy(o.Object, path...)
	if err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}
