// Command render renders every example scenario through the real crossplane
// CLI against this function, run locally. With no argument it prints a
// table: each scenario, the XR's Ready and the function's condition, and
// whether they are what the scenario's expected.yaml says. Naming
// scenarios, or -v, prints each output under a header line naming the
// scenario instead:
//
//	go run ./test/e2e/cmd/render               # the table of every scenario
//	go run ./test/e2e/cmd/render -v            # every scenario's YAML
//	go run ./test/e2e/cmd/render gateway       # the YAML of one composite's scenarios
//	go run ./test/e2e/cmd/render gateway/ready
//
// The headers are YAML comments, so the YAML output is one YAML stream. It
// builds the crossplane CLI on first use (minutes; later runs reuse it from
// bin/) and the function every time, and stops the function before it
// exits. It exits non-zero if any render fails or disagrees with its
// expected.yaml.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/modelplaneai/function-inference-gateway/test/e2e/harness"
)

func main() {
	flag.Usage = func() {
		_, _ = fmt.Fprintf(flag.CommandLine.Output(), "Usage: go run ./test/e2e/cmd/render [composite | composite/scenario]...\n")
		flag.PrintDefaults()
	}
	verbose := flag.Bool("v", false, "Print every scenario's YAML, the crossplane render command line of each, and the function's log, if any, at the end.")
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

	failed, err := renderAll(ctx, h, scenarios, verbose, !verbose && len(filters) == 0, logf)
	if err != nil {
		logf("%v", err)
		return 1
	}
	if log := h.Function.Log(); verbose && log != "" {
		logf("function log:\n%s", log)
	}
	if len(failed) > 0 {
		logf("cannot render %d of %d scenarios as expected: %s", len(failed), len(scenarios), strings.Join(failed, ", "))
		return 1
	}
	return 0
}

// renderAll renders each scenario and prints the table, or each output's
// YAML, and returns the IDs of those that failed or disagree with their
// expected.yaml.
func renderAll(ctx context.Context, h *harness.Harness, scenarios []harness.Scenario, verbose, table bool, logf func(string, ...any)) ([]string, error) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	defer tw.Flush() //nolint:errcheck // stdout
	if table {
		_, _ = fmt.Fprintln(tw, "SCENARIO\tREADY\tCONDITION\tSTATUS\tREASON\tAS EXPECTED")
	}
	var failed []string
	for _, s := range scenarios {
		out, err := h.Render(ctx, s)
		if err != nil {
			return nil, err
		}
		if !table {
			fmt.Printf("# ==== %s ====\n", s.ID())
			if verbose {
				fmt.Printf("# %s\n", out.Command())
			}
			_, _ = os.Stdout.Write(out.Stdout)
		}
		if out.ExitCode != 0 {
			if table {
				_, _ = fmt.Fprintf(tw, "%s\t-\t-\t-\t-\trender failed (exit code %d)\n", s.ID(), out.ExitCode)
			} else {
				fmt.Printf("# render failed with exit code %d, see stderr\n", out.ExitCode)
			}
			logf("cannot render %s (exit code %d):\n%s", s.ID(), out.ExitCode, out.Stderr)
			failed = append(failed, s.ID())
			continue
		}
		if bad := check(s, out, tw, table); bad != "" {
			logf("%s: %s", s.ID(), bad)
			failed = append(failed, s.ID())
		}
	}
	return failed, nil
}

// check compares a render with the scenario's expected.yaml, writes its
// row of the table when table is set, and returns what disagrees, if
// anything.
func check(s harness.Scenario, out *harness.Output, tw *tabwriter.Writer, table bool) string {
	r, err := harness.ParseRender(out.Stdout)
	if err != nil {
		return err.Error()
	}
	var bad []string
	var want *harness.Expected
	if s.Expected == "" {
		bad = append(bad, "it has no "+harness.FileExpected)
	} else if want, err = harness.ReadExpected(s.Expected); err != nil {
		bad = append(bad, err.Error())
	} else {
		bad = append(bad, want.Disagreements(r)...)
	}
	if table {
		ready, _ := r.Condition("Ready")
		verdict := "yes"
		if len(bad) > 0 {
			verdict = "NO: " + strings.Join(bad, "; ")
		}
		for _, c := range r.Conditions() {
			if c.Type == "Ready" || c.Type == "Synced" {
				continue
			}
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID(), ready.Status, c.Type, c.Status, c.Reason, verdict)
			break
		}
	}
	return strings.Join(bad, "; ")
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
			ids := make([]string, 0, len(all))
			for _, s := range all {
				ids = append(ids, s.ID())
			}
			return nil, fmt.Errorf("cannot find scenario %q: name a composite (a folder of example/) or one of %s", f, strings.Join(ids, ", "))
		}
	}
	return out, nil
}
