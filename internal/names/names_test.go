package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// envoyGatewayDefaultName computes the Deployment name Envoy Gateway v1.8.3
// generates when none is pinned, the way it does it: "envoy-" +
// GetHashedName("<ns>/<gw>", 48), where GetHashedName swaps "/" for "-",
// cuts the result to 48 characters and appends the first 8 hex characters
// of sha256 of the input (internal/utils/misc.go and
// internal/infrastructure/kubernetes/proxy/resource.go ExpectedResourceHashedName).
func envoyGatewayDefaultName(ns, gw string) string {
	in := ns + "/" + gw
	sum := sha256.Sum256([]byte(in))
	h := hex.EncodeToString(sum[:])[:8]
	n := strings.ReplaceAll(in, "/", "-")
	if len(n) > 48 {
		n = strings.TrimRight(n[:48], "-")
	}
	return "envoy-" + n + "-" + h
}

func TestEnvoyDeploymentMatchesEnvoyGatewayNaming(t *testing.T) {
	// The live name seen in the upstream review on two GKE clusters.
	const live = "envoy-modelplane-system-inference-gateway-5dbfd6c0"
	if got := envoyGatewayDefaultName(DefaultGatewayNamespace, DefaultGatewayName); got != live {
		t.Fatalf("envoyGatewayDefaultName(...) = %q, want the live name %q", got, live)
	}

	cases := map[string]struct{ ns, gw string }{
		"Defaults": {DefaultGatewayNamespace, DefaultGatewayName},
		"Short":    {"ns", "gw"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			def := envoyGatewayDefaultName(tc.ns, tc.gw)
			want := def[:len(def)-len("-12345678")]
			if got := EnvoyDeployment(tc.ns, tc.gw); got != want {
				t.Errorf("EnvoyDeployment(%q, %q) = %q, want Envoy Gateway's default name without its hash suffix %q", tc.ns, tc.gw, got, want)
			}
		})
	}
	if got, want := EnvoyDeployment(DefaultGatewayNamespace, DefaultGatewayName), "envoy-modelplane-system-inference-gateway"; got != want {
		t.Errorf("EnvoyDeployment(defaults) = %q, want %q", got, want)
	}
}

func TestTeamNamespace(t *testing.T) {
	cases := map[string]struct {
		ns   string
		want string
	}{
		"Short": {ns: "ml-team", want: "mp-ml-team-"},
		"Long":  {ns: strings.Repeat("a", 63), want: "mp-aaaa"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := TeamNamespace(tc.ns)
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("TeamNamespace(%q) = %q, want prefix %q", tc.ns, got, tc.want)
			}
			if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
				t.Errorf("TeamNamespace(%q) = %q is not a DNS label: %v", tc.ns, got, errs)
			}
			if again := TeamNamespace(tc.ns); again != got {
				t.Errorf("TeamNamespace(%q) is not deterministic: %q then %q", tc.ns, got, again)
			}
		})
	}
	a, b := TeamNamespace(strings.Repeat("a", 62)+"b"), TeamNamespace(strings.Repeat("a", 62)+"c")
	if a == b {
		t.Errorf("two namespaces with a long shared prefix map to the same team namespace %q", a)
	}
}

func TestChild(t *testing.T) {
	cases := map[string]struct {
		parent, child, want string
	}{
		"FitsAsIs": {parent: "qwen", child: "openai", want: "qwen-openai"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Child(tc.parent, tc.child); got != tc.want {
				t.Errorf("Child(%q, %q) = %q, want %q", tc.parent, tc.child, got, tc.want)
			}
		})
	}
	long := Child(strings.Repeat("r", 60), "backend")
	if len(long) > 63 || validation.IsDNS1123Label(long) != nil {
		t.Errorf("Child(long) = %q is not a DNS label of at most 63 characters", long)
	}
	if Child(strings.Repeat("r", 60), "backend-a") == Child(strings.Repeat("r", 60), "backend-b") {
		t.Errorf("Child of a long parent loses the child's identity")
	}
}
