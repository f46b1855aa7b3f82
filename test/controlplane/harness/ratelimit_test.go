package harness

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/mod/modfile"
)

// TestRateLimitToolIsEnvoyGateways: the rate-limit service the suite runs
// is the version Envoy Gateway's own module pins, the one its
// infrastructure deploys.
func TestRateLimitToolIsEnvoyGateways(t *testing.T) {
	const mod = "github.com/envoyproxy/ratelimit"
	for _, module := range []string{"envoy-gateway", "ratelimit"} {
		path := filepath.Join("..", "tools", module, "go.mod")
		b, err := os.ReadFile(path)
		Must(t, err)
		f, err := modfile.ParseLax(path, b, nil)
		Must(t, err)
		i := slices.IndexFunc(f.Require, func(r *modfile.Require) bool { return r.Mod.Path == mod })
		if i < 0 {
			t.Fatalf("%s requires no %s", path, mod)
		}
		if got := f.Require[i].Mod.Version; got != ToolRateLimit.Version {
			t.Errorf("%s requires %s %s, ToolRateLimit is %s", path, mod, got, ToolRateLimit.Version)
		}
	}
}
