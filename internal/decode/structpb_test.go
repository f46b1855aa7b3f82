package decode

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"
	appsv1 "k8s.io/api/apps/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestIntoProtobufValue checks that Into decodes a protobuf Value or Struct,
// as the function receives an observed manifest, exactly as it decodes the
// map that Value converts to: the same typed value, or the same error.
func TestIntoProtobufValue(t *testing.T) {
	conds := []any{condition("Accepted"), condition("Programmed")}
	cases := map[string]struct {
		reason string
		in     map[string]any
		into   func() any
	}{
		"Deployment": {
			reason: "The observed Envoy Deployment: counters as doubles, a template, times, unknown fields.",
			in: map[string]any{
				"apiVersion": "apps/v1", "kind": "Deployment",
				"metadata": map[string]any{"name": "envoy", "generation": 4.0, "creationTimestamp": "2026-12-01T10:00:00Z", "annotations": map[string]any{"a": "<b&c>"}},
				"spec": map[string]any{"replicas": 2.0, "strategy": map[string]any{"rollingUpdate": map[string]any{"maxSurge": "25%", "maxUnavailable": 1.0}},
					"template": map[string]any{"spec": map[string]any{"terminationGracePeriodSeconds": 600.0, "containers": []any{map[string]any{"name": "envoy", "resources": map[string]any{"limits": map[string]any{"cpu": "500m"}}}}}}},
				"status": map[string]any{"observedGeneration": 4.0, "replicas": 2.0, "availableReplicas": 2.0, "conditions": []any{condition("Available")}, "unknown": true},
			},
			into: func() any { return &appsv1.Deployment{} },
		},
		"GatewayStatus": {
			reason: "The observed Gateway's status: addresses, listeners, conditions.",
			in: map[string]any{"addresses": []any{map[string]any{"type": "IPAddress", "value": "203.0.113.10"}}, "conditions": conds,
				"listeners": []any{map[string]any{"name": "https", "attachedRoutes": 1e6, "supportedKinds": []any{map[string]any{"kind": "HTTPRoute"}}, "conditions": conds}}},
			into: func() any { return &gwapiv1.GatewayStatus{} },
		},
		"Null": {
			reason: "A null field leaves its pointer nil.",
			in:     map[string]any{"conditions": nil, "notReadySince": nil},
			into:   func() any { return &observedStatus{} },
		},
		"CaseInsensitive": {
			reason: "Names match case-insensitively, and an inline struct's fields as its own, as in encoding/json.",
			in:     map[string]any{"NAME": "a", "Replicas": 2.0, "backends": []any{map[string]any{"WEIGHT": 3.0}}, "limit": "1Gi"},
			into:   func() any { return &caseSpec{} },
		},
		"UnexportedInline": {
			reason: "go-json-experiment/json refuses the unexported inline struct: the slow path decodes it.",
			in:     map[string]any{"name": "a", "replicas": 2.0},
			into:   func() any { return &strictSpec{} },
		},
		"Fraction": {
			reason: "A fraction where a whole number belongs: the same error, naming the field.",
			in:     map[string]any{"name": "a", "replicas": 2.5},
			into:   func() any { return &caseSpec{} },
		},
		"TwoErrors": {
			reason: "Two wrong fields: the same first error as the map's, whose names encoding/json sorts.",
			in:     map[string]any{"weight": "heavy", "replicas": "two", "name": 1.0},
			into:   func() any { return &spec{} },
		},
		"HugeAndTiny": {
			reason: "Numbers that encoding/json writes with an exponent.",
			in:     map[string]any{"weight": 1e21, "replicas": 1e-7},
			into:   func() any { return &spec{} },
		},
	}
	opts := cmp.AllowUnexported(strictSpec{}, caseSpec{}, quantity{})
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want := tc.into()
			wantErr := Into("the object", "status", tc.in, want)
			s, err := structpb.NewStruct(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			for what, in := range map[string]any{"Value": structpb.NewStructValue(s), "Struct": s} {
				got := tc.into()
				gotErr := Into("the object", "status", in, got)
				if diff := cmp.Diff(errorText(wantErr), errorText(gotErr)); diff != "" {
					t.Errorf("%s\nInto(%s): error: -from the map, +from the %s:\n%s", tc.reason, what, what, diff)
				}
				if diff := cmp.Diff(want, got, opts); diff != "" {
					t.Errorf("%s\nInto(%s): -from the map, +from the %s:\n%s", tc.reason, what, what, diff)
				}
			}
		})
	}
}

// TestIntoNilProtobuf checks that a missing manifest or field, a nil Value
// or Struct, decodes as a missing map field (nil) does.
func TestIntoNilProtobuf(t *testing.T) {
	want := &spec{Name: "kept"}
	wantErr := Into("the object", "status", nil, want)
	for what, in := range map[string]any{"Value": (*structpb.Value)(nil), "Struct": (*structpb.Struct)(nil), "NullValue": structpb.NewNullValue()} {
		got := &spec{Name: "kept"}
		if diff := cmp.Diff(errorText(wantErr), errorText(Into("the object", "status", in, got))); diff != "" {
			t.Errorf("Into(nil %s): error: -from nil, +from the %s:\n%s", what, what, diff)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Into(nil %s): -from nil, +from the %s:\n%s", what, what, diff)
		}
	}
}

// TestAppendJSON checks that appendJSON writes what encoding/json writes of
// the value the Value converts to: sorted, byte for byte.
func TestAppendJSON(t *testing.T) {
	numbers := []float64{0, 1, -2, 0.5, 1e6, 123456789, 1e20, 1e21, -1e21, 1e-6, 1e-7, 1.5e-9, 5e-324, math.MaxFloat64, 0.1, 2.5e25}
	in := map[string]any{"b": "<quoted \"&\" \u2028 é>", "a": []any{true, false, nil, map[string]any{}, []any{}}, "n": []any{}}
	for _, f := range numbers {
		in["n"] = append(in["n"].([]any), f)
	}
	v, err := structpb.NewValue(in)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(v.AsInterface())
	if err != nil {
		t.Fatal(err)
	}
	got, err := appendJSON(nil, v, true)
	if err != nil {
		t.Fatal(err)
	}
	if diff := jsonDiff(t, want, got); diff != "" {
		t.Errorf("appendJSON: -encoding/json, +appendJSON:\n%s", diff)
	}
	// The numbers byte for byte: an integer field decodes only what has
	// no exponent.
	for _, f := range numbers {
		want, _ := json.Marshal(f)
		got, err := appendNumber(nil, f)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("appendNumber(%v) = %s, %v; want %s", f, got, err, want)
		}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := appendNumber(nil, f); err == nil {
			t.Errorf("appendNumber(%v): want an error, as encoding/json gives", f)
		}
	}
}

// jsonDiff compares two encodings of a JSON value by the value they
// hold: encoding/json escapes <, >, & and U+2028 for HTML where
// appendJSON does not, and both are the same JSON string. got must be
// valid JSON.
func jsonDiff(t *testing.T, want, got []byte) string {
	t.Helper()
	var wantAny, gotAny any
	if err := json.Unmarshal(want, &wantAny); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &gotAny); err != nil {
		t.Fatalf("appendJSON wrote invalid JSON %s: %v", got, err)
	}
	return cmp.Diff(wantAny, gotAny)
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzAppendJSON checks, for any JSON object, that appendJSON writes the
// same JSON value as encoding/json writes of the map its Value converts
// to, and that Into decodes both alike into a status with conditions.
func FuzzAppendJSON(f *testing.F) {
	f.Add(`{"conditions":[{"type":"Accepted","status":"True","observedGeneration":3,"lastTransitionTime":"2026-12-01T10:00:00Z"}]}`)
	f.Add(`{"replicas":1e21,"x":[null,true,-0.5,"\u003c\u2028"],"revision":2.5}`)
	f.Add(`{"notReadySince":"nope","conditions":{}}`)
	f.Fuzz(func(t *testing.T, in string) {
		var m map[string]any
		if json.Unmarshal([]byte(in), &m) != nil {
			return
		}
		s, err := structpb.NewStruct(m)
		if err != nil {
			return
		}
		v := structpb.NewStructValue(s)
		want, wantErr := json.Marshal(v.AsInterface())
		got, gotErr := appendJSON(nil, v, true)
		if (wantErr != nil) != (gotErr != nil) {
			t.Fatalf("appendJSON error %v, encoding/json error %v", gotErr, wantErr)
		}
		if wantErr != nil {
			return
		}
		if diff := jsonDiff(t, want, got); diff != "" {
			t.Fatalf("appendJSON: -encoding/json, +appendJSON:\n%s", diff)
		}
		fromMap, fromValue := &observedStatus{}, &observedStatus{}
		errMap, errValue := Into("the object", "status", v.AsInterface(), fromMap), Into("the object", "status", v, fromValue)
		if diff := cmp.Diff(errorText(errMap), errorText(errValue)); diff != "" {
			t.Fatalf("Into: error: -from the map, +from the Value:\n%s", diff)
		}
		if diff := cmp.Diff(fromMap, fromValue); diff != "" {
			t.Fatalf("Into: -from the map, +from the Value:\n%s", diff)
		}
	})
}
