package controlplane

import (
	"os"
	"testing"

	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// TestMain runs the tests, or, when the test binary is re-executed as a
// controller's wrapper, the wrapper.
func TestMain(m *testing.M) {
	if spec := os.Getenv(harness.IsolateEnv); spec != "" {
		os.Exit(harness.RunIsolated(spec))
	}
	os.Exit(m.Run())
}
