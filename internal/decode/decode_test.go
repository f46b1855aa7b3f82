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

// strictSpec has the shapes Strict walks: nested structs, lists of them,
// maps, an inline embedded struct and a type that decodes itself.
type strictSpec struct {
	inline   `json:",inline"`
	Name     string            `json:"name,omitempty"`
	TLS      *strictTLS        `json:"tls,omitempty"`
	Backends []strictBackend   `json:"backends,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Limit    *quantity         `json:"limit,omitempty"`
}

type inline struct {
	Replicas *int32 `json:"replicas,omitempty"`
}

type strictTLS struct {
	Hostname string `json:"hostname,omitempty"`
}

type strictBackend struct {
	Name   string `json:"name,omitempty"`
	Weight int32  `json:"weight,omitempty"`
}

// quantity decodes itself from a string, like resource.Quantity.
type quantity struct{ s string }

func (q *quantity) UnmarshalJSON(b []byte) error { q.s = string(b); return nil }

func TestStrict(t *testing.T) {
	two := int32(2)
	cases := map[string]struct {
		reason  string
		in      any
		want    strictSpec
		wantErr string
	}{
		"KnownFields": {
			reason: "Every field the type has decodes, an inline embedded struct's and a self-decoding type's too.",
			in: map[string]any{
				"name": "a", "replicas": 2.0, "tls": map[string]any{"hostname": "h"},
				"backends": []any{map[string]any{"name": "b", "weight": 3.0}},
				"labels":   map[string]any{"any-key": "v"}, "limit": "50Mi",
			},
			want: strictSpec{
				inline: inline{Replicas: &two}, Name: "a", TLS: &strictTLS{Hostname: "h"},
				Backends: []strictBackend{{Name: "b", Weight: 3}}, Labels: map[string]string{"any-key": "v"},
				Limit: &quantity{s: `"50Mi"`},
			},
		},
		"CrossplaneTolerated": {
			reason: "Crossplane's own spec.crossplane is not the user's and is tolerated.",
			in:     map[string]any{"name": "a", "crossplane": map[string]any{"compositionRef": map[string]any{"name": "c"}}},
			want:   strictSpec{Name: "a"},
		},
		"UnknownTopLevel": {
			reason:  "A field the function does not know is an error, not silently ignored.",
			in:      map[string]any{"name": "a", "replica": 2.0},
			wantErr: "cannot read InferenceGateway: spec.replica is not a field of InferenceGateway",
		},
		"UnknownNested": {
			reason:  "The error names the nested field's path.",
			in:      map[string]any{"tls": map[string]any{"hostName": "h"}},
			wantErr: "spec.tls.hostName is not a field",
		},
		"UnknownInList": {
			reason:  "The error names the list item.",
			in:      map[string]any{"backends": []any{map[string]any{"name": "b"}, map[string]any{"name": "c", "weigth": 1.0}}},
			wantErr: "spec.backends[1].weigth is not a field",
		},
		"CaseMatters": {
			reason:  "encoding/json would match Name case-insensitively; the API server does not, so neither does Strict.",
			in:      map[string]any{"Name": "a"},
			wantErr: "spec.Name is not a field",
		},
		"WrongShapeLeftToDecoder": {
			reason:  "A value of the wrong shape is the decoder's to report.",
			in:      map[string]any{"tls": "yes"},
			wantErr: "spec.tls is a JSON string, but must be an object",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := strictSpec{}
			err := Strict("InferenceGateway", "spec", tc.in, &got, CrossplaneSpecField)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nStrict(...): want error containing %q, got %v", tc.reason, tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nStrict(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(strictSpec{}, quantity{})); diff != "" {
				t.Errorf("%s\nStrict(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
