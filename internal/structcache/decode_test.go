package structcache

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
)

// viaProtojson is what toStruct replaces: encoding/json, then protojson.
func viaProtojson(o any) (*structpb.Struct, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	s := &structpb.Struct{}
	return s, protojson.Unmarshal(b, s)
}

func TestToStruct(t *testing.T) {
	cases := map[string]struct {
		in any
	}{
		"Scalars":  {in: obj{"s": "x", "n": 1000000, "f": 1.5, "neg": -3, "t": true, "f2": false, "null": nil}},
		"Nested":   {in: obj{"a": obj{"b": []any{1, "two", obj{"c": []any{}}, nil}}, "empty": obj{}}},
		"Escapes":  {in: obj{"q": "say \"hi\"\n\t\\ é ✓ \u2028", "k\"ey": "v"}},
		"CELQuery": {in: obj{"celQuery": "has(object.status) && object.status.conditions.exists(c, c.type == 'Accepted' && c.status == 'True')"}},
		"Composed": {in: modelRoute16(t)["route"]},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := viaProtojson(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := toStruct(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("toStruct(...) differs from protojson: -want, +got:\n%s", diff)
			}
		})
	}
	if _, err := toStruct([]any{1}); err == nil {
		t.Error("toStruct of a list: want an error, got none")
	}
}

// BenchmarkToStruct compares toStruct with the protojson path it replaced,
// on a composed Object.
func BenchmarkToStruct(b *testing.B) {
	o := aiGatewayRoute(b)
	b.Run("protojson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := viaProtojson(o); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("jsontext", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := toStruct(o); err != nil {
				b.Fatal(err)
			}
		}
	})
}
