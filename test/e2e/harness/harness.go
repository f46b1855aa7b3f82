// Package harness renders the example XRs through the real crossplane CLI
// against this function, run locally: it builds the CLI (from the pinned
// tools module) and the function, serves the function on a free loopback
// port, discovers the example scenarios and runs crossplane render for
// each. It backs both the end-to-end tests and `go run ./test/e2e/cmd/render`.
package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/modelplaneai/function-inference-gateway/test/internal/toolchain"
)

// AnnotationDevelopmentTarget tells crossplane render where a function of
// the Development runtime listens. Passed with --function-annotations it
// overrides the annotation of every function in functions.yaml, so the
// examples need no port of their own.
const AnnotationDevelopmentTarget = "render.crossplane.io/runtime-development-target"

// Harness holds the built tools and the running function.
type Harness struct {
	// Root is the repository root.
	Root string
	// Crossplane is the path of the crossplane CLI.
	Crossplane string
	// Function is the running function.
	Function *Function

	tmp string
}

// Logf reports progress, like log.Printf or testing.T.Logf.
type Logf func(format string, args ...any)

// New builds the crossplane CLI and the function, concurrently, and starts
// the function. logf, if not nil, hears about the slow steps. The caller
// must Close the Harness, which stops the function, also when New fails
// half way: New never returns a nil Harness.
func New(ctx context.Context, logf Logf) (*Harness, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	h := &Harness{}
	root, err := toolchain.Root()
	if err != nil {
		return h, err
	}
	h.Root = root
	if h.tmp, err = os.MkdirTemp("", "function-inference-gateway-e2e-"); err != nil {
		return h, fmt.Errorf("cannot make a temporary folder: %w", err)
	}

	if path, built, err := toolchain.CrossplanePath(); err == nil && !built {
		logf("building the crossplane CLI %s into %s; the first build takes minutes", toolchain.CrossplaneVersion, path)
	}
	var (
		wg             sync.WaitGroup
		fnBin          string
		xpErr, fnErr   error
		xpPath, fnPath string
	)
	wg.Go(func() { xpPath, xpErr = toolchain.Crossplane() })
	wg.Go(func() { fnPath, fnErr = toolchain.Function(h.tmp) })
	wg.Wait()
	if err := errors.Join(xpErr, fnErr); err != nil {
		return h, err
	}
	h.Crossplane, fnBin = xpPath, fnPath

	if h.Function, err = StartFunction(ctx, fnBin); err != nil {
		return h, err
	}
	logf("function serving on %s (pid %d)", h.Function.Address, h.Function.PID())
	return h, nil
}

// Close stops the function and removes the temporary folder.
func (h *Harness) Close() error {
	var errs []error
	if h.Function != nil {
		errs = append(errs, h.Function.Stop())
	}
	if h.tmp != "" {
		errs = append(errs, os.RemoveAll(h.tmp))
	}
	return errors.Join(errs...)
}

// Examples returns the absolute path of the example folder.
func (h *Harness) Examples() string { return filepath.Join(h.Root, "example") }

// Output is what one crossplane render printed, and how it exited.
type Output struct {
	// Args are the CLI's arguments.
	Args []string
	// Stdout is the rendered YAML stream.
	Stdout []byte
	// Stderr holds the CLI's errors, a fatal result's message among them.
	Stderr []byte
	// ExitCode is the CLI's exit code.
	ExitCode int
}

// Command returns the command line, for messages.
func (o *Output) Command() string { return "crossplane " + strings.Join(o.Args, " ") }

// RenderArgs returns the crossplane render arguments for the scenario, with
// the function at address.
func RenderArgs(s Scenario, address string) []string {
	args := []string{"render", s.XR, s.Composition, s.Functions,
		"--xrd=" + s.XRD,
		// Results go into the output so the golden files cover them.
		"--include-function-results",
	}
	if s.Observed != "" {
		args = append(args, "--observed-resources="+s.Observed)
	}
	if s.Required != "" {
		args = append(args, "--required-resources="+s.Required)
	}
	return append(args, "--function-annotations="+AnnotationDevelopmentTarget+"="+address)
}

// Render runs crossplane render for the scenario. A render that fails, for
// example on a Fatal result, is not an error: its exit code is in the
// Output. The error is for a CLI that could not run at all.
func (h *Harness) Render(ctx context.Context, s Scenario) (*Output, error) {
	o := &Output{Args: RenderArgs(s, h.Function.Address)}
	cmd := exec.CommandContext(ctx, h.Crossplane, o.Args...)
	cmd.Dir = h.Root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	o.Stdout, o.Stderr = stdout.Bytes(), stderr.Bytes()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && ctx.Err() == nil:
		o.ExitCode = exit.ExitCode()
	case err != nil:
		return o, fmt.Errorf("cannot run %s: %w", o.Command(), err)
	}
	return o, nil
}
