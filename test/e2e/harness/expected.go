package harness

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// Expected is what a scenario's expected.yaml says the XR reports after
// its render: its Ready status and the function's own conditions.
type Expected struct {
	// Ready is the XR's Ready condition status: "True" or "False".
	Ready string `json:"ready"`
	// Conditions are the function's conditions, by type.
	Conditions []ExpectedCondition `json:"conditions"`
	// SchemaRefuses says that the scenario's XR breaks its XRD's schema
	// on purpose: it shows what the function does with a spec that an
	// older XRD, or crossplane render, which checks nothing, lets through.
	SchemaRefuses string `json:"schemaRefuses,omitempty"`
}

// ExpectedCondition is one condition the function reports on the XR.
type ExpectedCondition struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	Reason string `json:"reason"`
}

// ReadExpected reads a scenario's expected.yaml.
func ReadExpected(path string) (*Expected, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	e := &Expected{}
	if err := yaml.UnmarshalStrict(b, e); err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	if e.Ready == "" || len(e.Conditions) == 0 {
		return nil, fmt.Errorf("cannot use %s: it must say ready and at least one condition", path)
	}
	return e, nil
}

// Condition is one condition of the rendered XR.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Conditions are the rendered XR's status conditions.
func (r *Rendered) Conditions() []Condition {
	st, _ := r.XR["status"].(map[string]any)
	list, _ := st["conditions"].([]any)
	out := make([]Condition, 0, len(list))
	for _, c := range list {
		m, _ := c.(map[string]any)
		s := func(k string) string { v, _ := m[k].(string); return v }
		out = append(out, Condition{Type: s("type"), Status: s("status"), Reason: s("reason"), Message: s("message")})
	}
	return out
}

// Condition returns the rendered XR's condition of type t, if any.
func (r *Rendered) Condition(t string) (Condition, bool) {
	for _, c := range r.Conditions() {
		if c.Type == t {
			return c, true
		}
	}
	return Condition{}, false
}

// Disagreements lists where the render differs from what is expected, each
// naming the condition, what was expected and what was rendered.
func (e *Expected) Disagreements(r *Rendered) []string {
	var out []string
	ready, _ := r.Condition("Ready")
	if ready.Status != e.Ready {
		out = append(out, fmt.Sprintf("Ready is %q (%s: %s), expected %q", ready.Status, ready.Reason, ready.Message, e.Ready))
	}
	for _, want := range e.Conditions {
		got, ok := r.Condition(want.Type)
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s is missing, expected %s/%s", want.Type, want.Status, want.Reason))
		case got.Status != want.Status || got.Reason != want.Reason:
			out = append(out, fmt.Sprintf("%s is %s/%s, expected %s/%s", want.Type, got.Status, got.Reason, want.Status, want.Reason))
		}
	}
	return out
}
