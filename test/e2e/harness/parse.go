package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// AnnotationCompositionResourceName names a composed resource within its
// composition; crossplane render keeps it on every composed resource.
const AnnotationCompositionResourceName = "crossplane.io/composition-resource-name"

// Rendered is crossplane render's output, split up: the XR, then the
// composed resources, then the function results (with
// --include-function-results).
type Rendered struct {
	// XR is the composite resource: what the pipeline set of its status.
	XR map[string]any
	// Composed are the composed resources, sorted by composition resource
	// name (crossplane render sorts them).
	Composed []map[string]any
	// Results are the non-fatal results of the pipeline.
	Results []Result
}

// Result is one function result as crossplane render prints it: a document
// of apiVersion render.crossplane.io/v1beta1, kind Result.
type Result struct {
	// Step is the pipeline step that returned the result.
	Step string `json:"step"`
	// Severity is SEVERITY_NORMAL or SEVERITY_WARNING; a fatal result
	// fails the render instead.
	Severity string `json:"severity"`
	// Message is the result's message.
	Message string `json:"message"`
}

// ParseRender splits crossplane render's output. The first document is the
// XR; a Context document (--include-context) is skipped.
func ParseRender(stdout []byte) (*Rendered, error) {
	docs, err := ParseYAML(stdout)
	if err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, errors.New("cannot find the XR: the render output is empty")
	}
	r := &Rendered{XR: docs[0]}
	for _, d := range docs[1:] {
		if d["apiVersion"] == "render.crossplane.io/v1beta1" {
			switch d["kind"] {
			case "Result":
				b, err := utiljson.Marshal(d)
				if err != nil {
					return nil, fmt.Errorf("cannot encode a Result: %w", err)
				}
				var res Result
				if err := utiljson.Unmarshal(b, &res); err != nil {
					return nil, fmt.Errorf("cannot decode a Result: %w", err)
				}
				r.Results = append(r.Results, res)
			case "Context":
			default:
				return nil, fmt.Errorf("cannot parse render output: unexpected kind %v of render.crossplane.io/v1beta1", d["kind"])
			}
			continue
		}
		r.Composed = append(r.Composed, d)
	}
	return r, nil
}

// ParseYAML decodes a YAML stream into one map per non-empty document,
// with numbers as int64 or float64 the way the API server decodes JSON.
func ParseYAML(b []byte) ([]map[string]any, error) {
	var out []map[string]any
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("cannot split YAML documents: %w", err)
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("cannot parse a YAML document: %w", err)
		}
		if string(bytes.TrimSpace(j)) == "null" {
			continue // only comments, or a stray ---
		}
		var m map[string]any
		if err := utiljson.Unmarshal(j, &m); err != nil {
			return nil, fmt.Errorf("cannot decode a YAML document into an object: %w", err)
		}
		out = append(out, m)
	}
}

// ResourceName returns a composed resource's composition resource name.
func ResourceName(obj map[string]any) string {
	md, _ := obj["metadata"].(map[string]any)
	a, _ := md["annotations"].(map[string]any)
	s, _ := a[AnnotationCompositionResourceName].(string)
	return s
}
