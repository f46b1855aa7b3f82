package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
)

// composedMessage is the message of the line the function logs for each
// call it answers with a composition (fn/fn.go, Function.RunFunction), at
// debug level, which the suite runs it at. The reconcile counts rest on it.
const composedMessage = "Composed"

// FunctionCallTimes returns when the function composed the XR of kind
// and name between from and to, by its log, in order.
func (c *Cluster) FunctionCallTimes(kind, name string, from, to time.Time) ([]time.Time, error) {
	all, err := c.FunctionCallsByName(kind, from, to)
	return all[name], err
}

// FunctionCallsByName returns when the function composed each XR of kind
// between from and to, by its log, in order, by the XR's name.
func (c *Cluster) FunctionCallsByName(kind string, from, to time.Time) (map[string][]time.Time, error) {
	path := filepath.Join(c.Procs.LogDir, "function.log")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out, err := parseFunctionCalls(string(b), kind, from, to)
	if err != nil {
		return nil, fmt.Errorf("cannot count the function's calls in %s: %w", path, err)
	}
	return out, nil
}

// composedLine is one composedMessage line of the function's log: the XR's
// name, when, and the line.
type composedLine struct {
	name string
	at   time.Time
	line string
}

// readComposed returns the function's composedMessage lines for XRs of
// kind, in order. A missing line must mean no call, not a line the parser
// no longer reads: it fails if no line of the whole log is a
// composedMessage line for kind, or if one is but its time or name does
// not parse, since then the function's log has changed under the suite.
func readComposed(log, kind string) ([]composedLine, error) {
	var out []composedLine
	for l := range strings.SplitSeq(log, "\n") {
		if !strings.Contains(l, "\t"+composedMessage+"\t") || !strings.Contains(l, `"xr-kind": "`+kind+`"`) {
			continue
		}
		_, rest, ok := strings.Cut(l, `"xr-name": "`)
		name, _, _ := strings.Cut(rest, `"`)
		ts, _, _ := strings.Cut(l, "\t")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if !ok || name == "" || err != nil {
			return nil, fmt.Errorf("cannot read the XR's name and the time of the function's log line %q: the suite's parser no longer matches fn/fn.go", l)
		}
		out = append(out, composedLine{name: name, at: at, line: l})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %q line for a %s in the whole log: the suite's parser no longer matches fn/fn.go, or the function does not log at debug level", composedMessage, kind)
	}
	return out, nil
}

// parseFunctionCalls returns when the function composed each XR of kind
// between from and to, by its log (readComposed), in order, by the XR's
// name.
func parseFunctionCalls(log, kind string, from, to time.Time) (map[string][]time.Time, error) {
	lines, err := readComposed(log, kind)
	if err != nil {
		return nil, err
	}
	out := map[string][]time.Time{}
	for _, l := range lines {
		if !l.at.Before(from) && l.at.Before(to) {
			out[l.name] = append(out[l.name], l.at)
		}
	}
	return out, nil
}

// FunctionVerdicts returns, by the XR's name, what the function computed
// of CondType for each XR of kind between from and to, by its log
// (parseFunctionVerdicts).
func (c *Cluster) FunctionVerdicts(kind, condType string, from, to time.Time) (map[string][]FnVerdict, error) {
	path := filepath.Join(c.Procs.LogDir, "function.log")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out, err := parseFunctionVerdicts(string(b), kind, condType, from, to)
	if err != nil {
		return nil, fmt.Errorf("cannot read the function's verdicts in %s: %w", path, err)
	}
	return out, nil
}

// FnVerdict is one call of the function for an XR, by its log: when, the
// status it computed for the condition, and whether it read the XR's
// InferenceGateway as GatewayReady=False (a ModelRoute's "gateway"
// evidence, internal/route gatewayView.evidence).
type FnVerdict struct {
	At                  time.Time // when the function logged it
	Ready, GatewayFalse bool      // the condition it computed was True; it read GatewayReady=False
}

// parseFunctionVerdicts returns what the function computed of CondType for
// each XR of kind between from and to, in order, by its log's
// composedMessage lines, which carry each condition as
// "<Type>": "<true|false>/<Reason>" (fn/fn.go). No verdict for an XR must
// mean no call, not a line the parser no longer reads: it fails as
// readComposed does, and also if no line of kind carries CondType at all,
// or one carries it in another form.
func parseFunctionVerdicts(log, kind, condType string, from, to time.Time) (map[string][]FnVerdict, error) {
	lines, err := readComposed(log, kind)
	if err != nil {
		return nil, err
	}
	out := map[string][]FnVerdict{}
	seen, readGateway := 0, 0
	key := `"` + condType + `": "`
	for _, l := range lines {
		_, rest, ok := strings.Cut(l.line, key)
		if !ok {
			continue
		}
		seen++
		v, _, _ := strings.Cut(rest, `"`)
		status, _, _ := strings.Cut(v, "/")
		if status != "true" && status != "false" {
			return nil, fmt.Errorf("cannot read %s's status in the function's log line %q: the suite's parser no longer matches fn/fn.go", condType, l.line)
		}
		_, gw, _ := strings.Cut(l.line, `"gateway": "`)
		gw, _, _ = strings.Cut(gw, `"`)
		if strings.Contains(gw, " "+gateway.ConditionType+"=True since ") || strings.Contains(gw, " "+gateway.ConditionType+"=False since ") {
			readGateway++
		}
		if !l.at.Before(from) && l.at.Before(to) {
			out[l.name] = append(out[l.name], FnVerdict{At: l.at, Ready: status == "true", GatewayFalse: strings.Contains(gw, " "+gateway.ConditionType+"=False since ")})
		}
	}
	if seen == 0 {
		return nil, fmt.Errorf("no %q line for a %s carries %s in the whole log: the suite's parser no longer matches fn/fn.go", composedMessage, kind, condType)
	}
	// Without the gateway's verdict in any line, no call would ever have
	// read the gateway as not ready, and every early True would pass for a
	// replay.
	if kind == "ModelRoute" && readGateway == 0 {
		return nil, fmt.Errorf("no %q line for a %s carries the gateway's verdict as \"gateway\": \"<name> %s=<True|False> since <time>\" in the whole log: the suite's parser no longer matches internal/route's evidence", composedMessage, kind, gateway.ConditionType)
	}
	return out, nil
}
