package xrd

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestXRDsMatchTypes regenerates the XRDs from the Go types with
// controller-gen, pinned in go.mod, and compares them with the committed
// package/configuration. Run `make generate` after changing the types.
func TestXRDsMatchTypes(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// controller-gen reads the types in a process of its own, which go
	// test's cache does not see, and a changed marker or doc comment
	// leaves the test binary as it was: reading the sources here makes a
	// change to them rerun the test.
	for _, dir := range []string{filepath.Join("..", "apis", "v1alpha1")} {
		srcs, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(srcs) == 0 {
			t.Fatalf("cannot find the Go files of %s: %v", dir, err)
		}
		for _, f := range srcs {
			if _, err := os.ReadFile(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	want, err := Generate(wd)
	if err != nil {
		t.Fatalf("Generate(): %v", err)
	}
	if len(want) != len(composites) {
		t.Fatalf("Generate() wrote %d files, want one per composite (%d)", len(want), len(composites))
	}
	for path, b := range want {
		t.Run(path, func(t *testing.T) {
			got, err := os.ReadFile(filepath.Join("..", "..", "package", "configuration", path))
			if err != nil {
				t.Fatalf("cannot read the committed XRD: %v", err)
			}
			if diff := cmp.Diff(string(b), string(got)); diff != "" {
				t.Errorf("package/configuration/%s has drifted from the Go types; run make generate: -generated, +committed:\n%s", path, diff)
			}
		})
	}
}
