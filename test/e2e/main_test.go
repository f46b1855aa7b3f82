package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/modelplaneai/function-inference-gateway/test/e2e/harness"
	"github.com/modelplaneai/function-inference-gateway/test/e2e/validate"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ with the current render output")

// Set up once per test process by TestMain.
var (
	h         *harness.Harness
	scenarios []harness.Scenario
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// run builds the CLI and the function once for every test, and stops the
// function when the tests are done, whatever their outcome. It is separate
// from TestMain so that its deferred Close runs before os.Exit.
func run(m *testing.M) int {
	flag.Parse()
	var err error
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	h, err = harness.New(context.Background(), logf)
	defer func() {
		if err := h.Close(); err != nil {
			logf("%v", err)
		}
	}()
	if err != nil {
		logf("cannot set up the end-to-end tests: %v", err)
		return 1
	}
	if scenarios, err = harness.Discover(h.Examples()); err != nil {
		logf("cannot set up the end-to-end tests: %v", err)
		return 1
	}
	return m.Run()
}

// renders caches each scenario's render: several tests read the same
// output, and a render is a process start and a gRPC round trip.
var renders sync.Map // scenario ID -> *renderOnce

type renderOnce struct {
	once sync.Once
	out  *harness.Output
	err  error
}

// render returns the scenario's render output, rendering it on first use.
func render(t *testing.T, s harness.Scenario) *harness.Output {
	t.Helper()
	v, _ := renders.LoadOrStore(s.ID(), &renderOnce{})
	r := v.(*renderOnce)
	r.once.Do(func() { r.out, r.err = h.Render(context.Background(), s) })
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.out
}

// rendered returns the scenario's parsed render output. A render that
// failed fails the test.
func rendered(t *testing.T, s harness.Scenario) *harness.Rendered {
	t.Helper()
	out := render(t, s)
	if out.ExitCode != 0 {
		t.Fatalf("cannot render %s: crossplane render exited %d:\n%s\ncommand: %s", s.ID(), out.ExitCode, out.Stderr, out.Command())
	}
	r, err := harness.ParseRender(out.Stdout)
	if err != nil {
		t.Fatalf("cannot parse the render output of %s: %v", s.ID(), err)
	}
	return r
}

// The upstream CRDs, loaded on first use, once per process.
var (
	validatorOnce sync.Once
	validator     *validate.Validator
	validatorErr  error
)

func upstreamValidator(t *testing.T) *validate.Validator {
	t.Helper()
	validatorOnce.Do(func() {
		validator, validatorErr = validate.Load(context.Background(), h.Root, validate.Sources...)
	})
	if validatorErr != nil {
		t.Fatalf("cannot load the upstream CRDs: %v", validatorErr)
	}
	return validator
}
