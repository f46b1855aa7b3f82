package e2e

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/modelplaneai/function-inference-gateway/test/e2e/harness"
)

// goldenDir holds one folder of golden files per example composite.
// testdata/malformed holds inputs, not golden files.
const (
	goldenDir    = "testdata"
	malformedDir = "malformed"
	updateHint   = "if the change is intended, run: go test ./test/e2e -run TestRender -update"
)

// renderTimePlaceholder stands in the golden files for a time the
// rendering function takes from its own clock: crossplane render cannot set
// it.
const renderTimePlaceholder = "<render time>"

// renderTimeValue finds, in the render output, the start of the
// composite's not-ready spell (status.notReadySince) and when the gateway
// began to report (the gateway-status ConfigMap's reportingSince), which a
// scenario without them gets at the function's clock.
var renderTimeValue = regexp.MustCompile(`(?m)^(\s+(?:notReadySince|reportingSince): )"?[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z"?$`)

// withoutRenderTime replaces the times renderTimeValue finds, so the
// golden file does not change with the clock.
func withoutRenderTime(out []byte) []byte {
	return renderTimeValue.ReplaceAll(out, []byte("${1}"+renderTimePlaceholder))
}

func goldenPath(s harness.Scenario) string {
	return filepath.Join(goldenDir, s.Composite, s.Name+".yaml")
}

// TestRender renders every example scenario and compares the whole output,
// XR status, composed resources and results, with its golden file.
func TestRender(t *testing.T) {
	for _, s := range scenarios {
		t.Run(s.ID(), func(t *testing.T) {
			out := render(t, s)
			if out.ExitCode != 0 {
				t.Fatalf("cannot render %s: crossplane render exited %d:\n%s\ncommand: %s", s.ID(), out.ExitCode, out.Stderr, out.Command())
			}
			if len(bytes.TrimSpace(out.Stdout)) == 0 {
				t.Fatalf("crossplane render printed nothing for %s", s.ID())
			}
			golden := goldenPath(s)
			got := withoutRenderTime(out.Stdout)
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("cannot read the golden file: %v\nto create it, run: go test ./test/e2e -run TestRender -update", err)
			}
			if len(bytes.TrimSpace(want)) == 0 {
				t.Fatalf("golden file %s is empty; %s", golden, updateHint)
			}
			// Compare line by line, so the diff names the lines that changed.
			if diff := cmp.Diff(lines(want), lines(got)); diff != "" {
				t.Errorf("crossplane render output of %s differs from %s (-want +got):\n%s\n%s", s.ID(), golden, diff, updateHint)
			}
		})
	}
}

// TestRenderGoldenFilesHaveScenarios finds golden files whose scenario is
// gone, and with -update deletes them.
func TestRenderGoldenFilesHaveScenarios(t *testing.T) {
	want := map[string]bool{}
	for _, s := range scenarios {
		want[goldenPath(s)] = true
	}
	err := filepath.WalkDir(goldenDir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path == filepath.Join(goldenDir, malformedDir):
			return filepath.SkipDir
		case d.IsDir() || want[path]:
			return nil
		case *update:
			t.Logf("deleting %s: no example scenario renders it", path)
			return os.Remove(path)
		default:
			t.Errorf("golden file %s has no example scenario; %s", path, updateHint)
			return nil
		}
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
}

// TestRenderXRConditions checks, apart from the golden files, that the
// function reported its own conditions on the XR, each with a reason and a
// message a user can act on. Ready (and Synced) are Crossplane's; every
// other condition type is the function's.
func TestRenderXRConditions(t *testing.T) {
	for _, s := range scenarios {
		t.Run(s.ID(), func(t *testing.T) {
			r := rendered(t, s)
			conds, err := conditions(r.XR)
			if err != nil {
				t.Fatal(err)
			}
			custom := 0
			for _, c := range conds {
				if c.Type == "Ready" || c.Type == "Synced" {
					continue
				}
				custom++
				t.Logf("%s=%s reason=%s message=%q", c.Type, c.Status, c.Reason, c.Message)
				if c.Reason == "" || c.Message == "" {
					t.Errorf("condition %s of the XR needs a reason and a message, got reason %q, message %q", c.Type, c.Reason, c.Message)
				}
				if c.Status != "True" && c.Status != "False" && c.Status != "Unknown" {
					t.Errorf("condition %s of the XR has status %q, want True, False or Unknown", c.Type, c.Status)
				}
			}
			if custom == 0 {
				t.Errorf("the XR has no condition of the function's, only %v", conds)
			}
		})
	}
}

// TestRenderResults parses the function results in each render output and
// lists them; the golden files cover their exact content. A result a user
// sees must say which step sent it and what it means.
func TestRenderResults(t *testing.T) {
	for _, s := range scenarios {
		t.Run(s.ID(), func(t *testing.T) {
			r := rendered(t, s)
			for _, res := range r.Results {
				t.Logf("step=%s severity=%s message=%q", res.Step, res.Severity, res.Message)
				if res.Step == "" || res.Message == "" {
					t.Errorf("result %+v needs a step and a message", res)
				}
				// Fatal results stop the render, so never reach the output.
				if res.Severity != "SEVERITY_NORMAL" && res.Severity != "SEVERITY_WARNING" {
					t.Errorf("result %+v has severity %q, want SEVERITY_NORMAL or SEVERITY_WARNING", res, res.Severity)
				}
			}
			t.Logf("%d results", len(r.Results))
		})
	}
}

// condition is one entry of an XR's status.conditions.
type condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func conditions(xr map[string]any) ([]condition, error) {
	status, _ := xr["status"].(map[string]any)
	var out []condition
	if err := fromUnstructured(status["conditions"], &out); err != nil {
		return nil, err
	}
	return out, nil
}

func lines(b []byte) []string {
	return strings.Split(string(b), "\n")
}
