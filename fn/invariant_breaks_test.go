package fn

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// An invariantBreak is a mistake, made in a copy of one source file, that
// FuzzInvariants must catch from its seeds alone: each invariant it checks
// has one. Compiled in with go test -overlay, so the working tree is never
// touched.
type invariantBreak struct {
	name, what string
	file       string // relative to the module's root
	old, new   string // the one edit
	caughtBy   string // what the failing run prints
}

var invariantBreaks = []invariantBreak{{
	name:     "ca-published-raw",
	what:     "the client CA Secret's tls.crt published as it is, not parsed down to its certificates",
	file:     "internal/gateway/mtls.go",
	old:      "certs, err := cacert.Certificates(crt)",
	new:      "certs, err := string(crt), error(nil)",
	caughtBy: "invariant 1:",
}, {
	name:     "names-joined",
	what:     "a backend's objects named <route>-<backend> whatever the backend's name, as before",
	file:     "internal/names/backend.go",
	old:      `return route + "-" + strings.ReplaceAll(backend, "-", "."), true`,
	new:      `return route + "-" + backend, true`,
	caughtBy: "invariant 2:",
}, {
	name:     "access-policy-one-name",
	what:     "every route's access SecurityPolicy under one name in the team namespace",
	file:     "internal/names/names.go",
	old:      "return Child(route, accessPolicySuffix)",
	new:      "return accessPolicySuffix",
	caughtBy: "invariant 2:",
}, {
	name:     "model-any-namespace",
	what:     "a route may serve a model name in any namespace's space",
	file:     "internal/apis/v1alpha1/model_names.go",
	old:      "\tcase ok && owner == ns:\n",
	new:      "\tcase ok:\n",
	caughtBy: "invariant 3:",
}, {
	name:     "caller-ids-in-map-order",
	what:     "a callers' Secret's client IDs in Go's map order, which the message naming an empty key follows",
	file:     "internal/gateway/callers.go",
	old:      "s.ids = slices.Sorted(maps.Keys(d))",
	new:      "s.ids = slices.Collect(maps.Keys(d))",
	caughtBy: "invariant 4:",
}}

// TestInvariantBreaksAreCaught runs FuzzInvariants' seeds against the
// function with each deliberate break, and requires each run to fail
// where the break says. A map-order break fails only when the two calls'
// orders differ (about half the time with two keys), so each run repeats
// the seeds twenty times. Each break compiles this package's tests once
// more (seconds, from the build cache).
func TestInvariantBreaksAreCaught(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range invariantBreaks {
		t.Run(b.name, func(t *testing.T) {
			src := filepath.Join(root, b.file)
			body, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(body), b.old); n != 1 {
				t.Fatalf("cannot apply the break: %q occurs %d times in %s, want once; update invariant_breaks_test.go", b.old, n, b.file)
			}
			dir := t.TempDir()
			broken := filepath.Join(dir, filepath.Base(b.file))
			if err := os.WriteFile(broken, []byte(strings.Replace(string(body), b.old, b.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			ov, err := json.Marshal(map[string]map[string]string{"Replace": {src: broken}})
			if err != nil {
				t.Fatal(err)
			}
			overlay := filepath.Join(dir, "overlay.json")
			if err := os.WriteFile(overlay, ov, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.CommandContext(t.Context(), "go", "test", "-overlay="+overlay, "-count=20", "-run=^FuzzInvariants$", ".")
			out, err := cmd.CombinedOutput()
			switch {
			case err == nil:
				t.Errorf("FuzzInvariants passed with the deliberate break %q (%s): it does not catch it", b.name, b.what)
			case !strings.Contains(string(out), b.caughtBy):
				t.Errorf("FuzzInvariants failed with %q, but not where it should (%q):\n%s", b.name, b.caughtBy, out)
			default:
				for l := range strings.SplitSeq(string(out), "\n") {
					if strings.Contains(l, b.caughtBy) {
						t.Logf("caught: %s", strings.TrimSpace(l))
						break
					}
				}
			}
		})
	}
}
