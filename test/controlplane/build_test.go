package controlplane

import (
	"testing"

	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
	"github.com/modelplaneai/function-inference-gateway/test/internal/toolchain"
)

// TestBuildBinaries only builds (or finds cached) every binary the control
// plane runs, with the Crossplane and provider-kubernetes controllersEnv
// picks. .ci/run starts it beside the README's test command, so that a
// cold machine builds the control plane while the fast tests run, and the
// control-plane suite then finds every binary cached.
func TestBuildBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the control plane's binaries")
	}
	root, err := toolchain.Root()
	if err != nil {
		t.Fatal(err)
	}
	pair := harness.MustControllers(t)
	t.Logf("controllers: %s", pair)
	harness.BuildAll(t.Context(), t, root, pair, buildPreviousFunction)
}
