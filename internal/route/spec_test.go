package route

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadSpecFields(t *testing.T) {
	backend := map[string]any{"name": "a", "endpoint": map[string]any{"hostname": "api.openai.com"}, "schema": map[string]any{"name": "OpenAI"}}
	cases := map[string]struct {
		reason  string
		spec    map[string]any
		wantErr string
	}{
		"Known": {
			reason: "The fields of the XRD decode.",
			spec:   map[string]any{"gatewayName": "g", "backends": []any{backend}},
		},
		"CrossplaneFields": {
			reason: "Crossplane's own spec.crossplane is tolerated.",
			spec:   map[string]any{"gatewayName": "g", "backends": []any{backend}, "crossplane": map[string]any{"compositionRef": map[string]any{"name": "c"}}},
		},
		"UnknownField": {
			reason:  "A field the function does not know is an error, not silently ignored.",
			spec:    map[string]any{"gatewayName": "g", "backends": []any{backend}, "timeouts": map[string]any{"requests": "10s"}},
			wantErr: "cannot read ModelRoute: spec.timeouts.requests is not a field of ModelRoute; remove it, or check its spelling against its schema",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := readSpec(map[string]any{"spec": tc.spec})
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, got); diff != "" {
				t.Errorf("%s\nreadSpec(...) error: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
