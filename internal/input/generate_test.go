package input

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestInputCRDMatchesTypes regenerates the Input CRD from the Go types with
// controller-gen, pinned in go.mod, into a temporary folder and compares it
// with the committed package/input. Run `make generate` after changing the
// types.
func TestInputCRDMatchesTypes(t *testing.T) {
	out := t.TempDir()
	cmd := exec.Command("go", "run", "-tags", "generate", "sigs.k8s.io/controller-tools/cmd/controller-gen",
		"paths=./v1beta1", "crd:crdVersions=v1", "output:artifacts:config="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cannot run controller-gen: %v\n%s", err, b)
	}
	const file = "inferencegateway.fn.crossplane.io_inputs.yaml"
	want, err := os.ReadFile(filepath.Join(out, file))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", "package", "input", file))
	if err != nil {
		t.Fatalf("cannot read the committed CRD: %v", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("package/input/%s has drifted from internal/input/v1beta1; run make generate: -generated, +committed:\n%s", file, diff)
	}
}
