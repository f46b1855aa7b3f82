// Command render renders every example scenario through the real crossplane
// CLI against this function, run locally, and prints each output under a
// header line naming the scenario:
//
//	go run ./test/e2e/cmd/render            # every scenario
//	go run ./test/e2e/cmd/render gateway    # the scenarios of one composite
//	go run ./test/e2e/cmd/render gateway/default
//
// The headers are YAML comments, so the whole output is one YAML stream. It
// builds the crossplane CLI on first use (minutes; later runs reuse it from
// bin/) and the function every time, and stops the function before it
// exits. It exits non-zero if any render fails.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/modelplaneai/function-inference-gateway/test/e2e/harness"
)

func main() {
	flag.Usage = func() {
		_, _ = fmt.Fprintf(flag.CommandLine.Output(), "Usage: go run ./test/e2e/cmd/render [composite | composite/scenario]...\n")
		flag.PrintDefaults()
	}
	verbose := flag.Bool("v", false, "Print the crossplane render command line of each scenario, and the function's log, if any, at the end.")
	flag.Parse()
	os.Exit(run(*verbose, flag.Args()))
}

func run(verbose bool, filters []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	h, err := harness.New(ctx, logf)
	// Close stops the function whatever happens below; run returns before
	// main calls os.Exit, so this deferred call always runs.
	defer func() {
		if err := h.Close(); err != nil {
			logf("%v", err)
		}
	}()
	if err != nil {
		logf("%v", err)
		return 1
	}

	scenarios, err := harness.Discover(h.Examples())
	if err != nil {
		logf("%v", err)
		return 1
	}
	scenarios, err = selectScenarios(scenarios, filters)
	if err != nil {
		logf("%v", err)
		return 1
	}

	var failed []string
	for _, s := range scenarios {
		out, err := h.Render(ctx, s)
		if err != nil {
			logf("%v", err)
			return 1
		}
		fmt.Printf("# ==== %s ====\n", s.ID())
		if verbose {
			fmt.Printf("# %s\n", out.Command())
		}
		_, _ = os.Stdout.Write(out.Stdout)
		if out.ExitCode != 0 {
			fmt.Printf("# render failed with exit code %d, see stderr\n", out.ExitCode)
			logf("cannot render %s (exit code %d):\n%s", s.ID(), out.ExitCode, out.Stderr)
			failed = append(failed, s.ID())
		}
	}
	if log := h.Function.Log(); verbose && log != "" {
		logf("function log:\n%s", log)
	}
	if len(failed) > 0 {
		logf("cannot render %d of %d scenarios: %s", len(failed), len(scenarios), strings.Join(failed, ", "))
		return 1
	}
	return 0
}

// selectScenarios keeps the scenarios a filter names, by composite or by
// ID, in their discovered order. No filters keeps them all; a filter that
// names nothing is an error.
func selectScenarios(all []harness.Scenario, filters []string) ([]harness.Scenario, error) {
	if len(filters) == 0 {
		return all, nil
	}
	var out []harness.Scenario
	used := map[string]bool{}
	for _, s := range all {
		for _, f := range filters {
			if f == s.Composite || f == s.ID() {
				out = append(out, s)
				used[f] = true
				break
			}
		}
	}
	for _, f := range filters {
		if !used[f] {
			return nil, fmt.Errorf("cannot find scenario %q: name a composite (a folder of example/) or a composite/scenario", f)
		}
	}
	return out, nil
}
