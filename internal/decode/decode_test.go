package decode

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type spec struct {
	Replicas *int32 `json:"replicas,omitempty"`
	Name     string `json:"name,omitempty"`
	Weight   int32  `json:"weight,omitempty"`
}

func TestInto(t *testing.T) {
	two := int32(2)
	cases := map[string]struct {
		reason  string
		in      any
		want    spec
		wantErr string
	}{
		"Float64Whole": {
			reason: "structpb numbers arrive as float64; whole ones must decode into integers.",
			in:     map[string]any{"replicas": 2.0, "weight": 1000000.0},
			want:   spec{Replicas: &two, Weight: 1000000},
		},
		"Fraction": {
			reason:  "A fraction is not a replica count.",
			in:      map[string]any{"replicas": 2.5},
			wantErr: "spec.replicas is a JSON number 2.5, but must be a whole number; fix spec.replicas",
		},
		"StringForInt": {
			reason:  "A string is not a replica count.",
			in:      map[string]any{"replicas": "two"},
			wantErr: "spec.replicas is a JSON string, but must be a whole number",
		},
		"NumberForString": {
			reason:  "A number is not a name.",
			in:      map[string]any{"name": 3.0},
			wantErr: "spec.name is a JSON number, but must be a string",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := spec{}
			err := Into("InferenceGateway spec", "spec", tc.in, &got)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nInto(...): want error containing %q, got %v", tc.reason, tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nInto(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nInto(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
