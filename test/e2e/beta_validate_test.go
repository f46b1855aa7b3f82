package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/modelplaneai/function-inference-gateway/test/e2e/harness"
	"github.com/modelplaneai/function-inference-gateway/test/internal/toolchain"
)

// crossplaneImage is the package crossplane beta validate loads
// Crossplane's own CRDs from (XRD, Composition, ...). It is named
// explicitly, rather than left to the CLI's default (its own version), so
// that it matches the cache folder below however the CLI was built.
const crossplaneImage = "xpkg.crossplane.io/crossplane/crossplane:" + toolchain.CrossplaneVersion

// TestCrossplaneBetaValidate runs crossplane beta validate, offline, on the
// examples: every XRD and Composition against Crossplane's CRDs, the
// function's Input in each Composition's pipeline against its CRD
// (package/input), and every XR (each composite's xr.yaml and each
// scenario's) against its XRD in package/configuration.
func TestCrossplaneBetaValidate(t *testing.T) {
	cache := crossplaneSchemaCache(t)

	composites, err := filepath.Glob(filepath.Join(harness.ConfigurationDir(h.Examples()), "*", harness.FileComposition))
	if err != nil {
		t.Fatal(err)
	}
	var xrds, resources []string
	for _, comp := range composites {
		xrd := filepath.Join(filepath.Dir(comp), harness.FileXRD)
		xrds = append(xrds, xrd)
		resources = append(resources, xrd, comp)
	}
	// Scenarios whose XR breaks its XRD on purpose, with what the schema
	// says of it.
	refused := map[string]string{}
	for _, s := range scenarios {
		if s.Expected != "" {
			e, err := harness.ReadExpected(s.Expected)
			if err != nil {
				t.Fatal(err)
			}
			if e.SchemaRefuses != "" {
				refused[s.XR] = e.SchemaRefuses
				continue
			}
		}
		if !slices.Contains(resources, s.XR) {
			resources = append(resources, s.XR)
		}
	}
	inputCRDs, err := filepath.Glob(filepath.Join(h.Root, "package", "input", "*.yaml"))
	if err != nil || len(inputCRDs) == 0 {
		t.Fatalf("cannot find the Input CRD in package/input: %v", err)
	}
	extensions := slices.Concat(xrds, inputCRDs)

	t.Run("Examples", func(t *testing.T) {
		out, code := betaValidate(t, cache, extensions, resources)
		t.Logf("crossplane beta validate:\n%s", out)
		total, missing, failures := validateTotals(t, out)
		// The Compositions' Inputs count as resources of their own.
		if total < len(resources) || missing != 0 || failures != 0 || code != 0 {
			t.Errorf("crossplane beta validate: exit code %d, %d resources, %d missing schemas, %d failures; want exit 0, at least %d resources, none missing, no failures:\n%s",
				code, total, missing, failures, len(resources), out)
		}
	})

	// The same validation must reject the malformed XRs, or the check above
	// proves nothing.
	gatewayXRD := filepath.Join(harness.ConfigurationDir(h.Examples()), "gateway", harness.FileXRD)
	cases := map[string]struct {
		xr   string
		want string
	}{
		"MissingProviderConfigName": {xr: "no-provider-config.yaml", want: "spec.providerConfigName: Required value"},
		"ReplicasIsAString":         {xr: "replicas-string.yaml", want: "spec.replicas in body must be of type integer"},
	}
	for xr, want := range refused {
		name := filepath.Base(filepath.Dir(filepath.Dir(xr))) + "/" + filepath.Base(filepath.Dir(xr))
		cases["Scenario/"+name] = struct {
			xr   string
			want string
		}{xr: xr, want: want}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			xr := tc.xr
			if !filepath.IsAbs(xr) {
				var err error
				if xr, err = filepath.Abs(filepath.Join(goldenDir, malformedDir, tc.xr)); err != nil {
					t.Fatal(err)
				}
			}
			xrd := gatewayXRD
			if strings.Contains(xr, string(filepath.Separator)+"route"+string(filepath.Separator)) {
				xrd = filepath.Join(harness.ConfigurationDir(h.Examples()), "route", harness.FileXRD)
			}
			out, code := betaValidate(t, cache, []string{xrd}, []string{xr})
			if code == 0 {
				t.Errorf("crossplane beta validate accepted %s, want it rejected:\n%s", tc.xr, out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("crossplane beta validate of %s does not say %q:\n%s", tc.xr, tc.want, out)
			}
		})
	}
}

// crossplaneSchemaCache returns a crossplane beta validate cache folder
// holding Crossplane's CRDs, so the CLI does not download the Crossplane
// package: it skips the download of a package whose folder
// <cache>/<image with : replaced by @> exists, and loads the YAML files in
// it (crossplane v2.2.0 cmd/crank/beta/validate/cache.go). The CRDs come
// from cluster/crds of the crossplane module the CLI is built from.
func crossplaneSchemaCache(t *testing.T) string {
	t.Helper()
	dirs, err := toolchain.ModuleDirs(context.Background(), filepath.Join(h.Root, "test", "tools"), "github.com/crossplane/crossplane/v2@"+toolchain.CrossplaneVersion)
	if err != nil {
		t.Fatal(err)
	}
	crds, err := filepath.Glob(filepath.Join(dirs["github.com/crossplane/crossplane/v2@"+toolchain.CrossplaneVersion], "cluster", "crds", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("cannot find Crossplane's CRDs in the crossplane module: %v", err)
	}
	cache := t.TempDir() // absolute, as --cache-dir needs
	dir := filepath.Join(cache, strings.ReplaceAll(crossplaneImage, ":", "@"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range crds {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return cache
}

// betaValidate runs crossplane beta validate and returns its combined
// output and exit code.
func betaValidate(t *testing.T, cache string, extensions, resources []string) (string, int) {
	t.Helper()
	args := []string{"beta", "validate",
		strings.Join(extensions, ","), strings.Join(resources, ","),
		"--cache-dir=" + cache,
		"--crossplane-image=" + crossplaneImage,
		"--error-on-missing-schemas",
	}
	cmd := exec.Command(h.Crossplane, args...)
	cmd.Dir = h.Root
	b, err := cmd.CombinedOutput()
	out := string(b)
	code := 0
	if err != nil {
		ee := &exec.ExitError{}
		ok := errors.As(err, &ee)
		if !ok {
			t.Fatalf("cannot run crossplane %s: %v", strings.Join(args, " "), err)
		}
		code = ee.ExitCode()
	}
	// A download means the cache above was not used, and the test would
	// need the network.
	if strings.Contains(out, "downloading") {
		t.Errorf("crossplane beta validate downloaded a package instead of using the cache:\n%s", out)
	}
	return out, code
}

var totalsRE = regexp.MustCompile(`Total (\d+) resources: (\d+) missing schemas, \d+ success cases, (\d+) failure cases`)

// validateTotals reads crossplane beta validate's summary line.
func validateTotals(t *testing.T, out string) (total, missing, failures int) {
	t.Helper()
	m := totalsRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("cannot find the summary line in the output of crossplane beta validate:\n%s", out)
	}
	n := make([]int, 3)
	for i := range n {
		v, err := strconv.Atoi(m[i+1])
		if err != nil {
			t.Fatal(fmt.Errorf("cannot read the summary line: %w", err))
		}
		n[i] = v
	}
	return n[0], n[1], n[2]
}
