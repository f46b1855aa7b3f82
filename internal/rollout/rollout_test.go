package rollout

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/ptr"
)

var markers = []string{"aigateway.envoyproxy.io/extproc-config-hash", "aigateway.envoyproxy.io/uuid"}

// deployment builds an Envoy Deployment the way the API server returns it.
func deployment(gen, observed int64, annotations map[string]string, replicas, updated, available int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "envoy-modelplane-system-inference-gateway", Namespace: "envoy-gateway-system", Generation: gen},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
				Labels:      map[string]string{"app.kubernetes.io/name": "envoy"},
				Annotations: annotations,
			}},
		},
		Status: appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated, AvailableReplicas: available, ReadyReplicas: available},
	}
}

// asProviderSees round-trips the object through JSON into map[string]any, as
// provider-kubernetes does before it evaluates celQuery.
func asProviderSees(t testing.TB, o any) map[string]any {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// asProviderV13Sees round-trips the object the way provider-kubernetes
// v1.3.1 does before evaluating celQuery: JSON decoded with
// k8s.io/apimachinery/pkg/util/json, which turns whole numbers into int64
// (internal/controller/namespaced/object/object.go, checkDeriveFromCelQuery).
func asProviderV13Sees(t testing.TB, o any) map[string]any {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if err := utiljson.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["metadata"].(map[string]any)["generation"].(int64); !ok {
		t.Fatalf("util/json decoded generation as %T, want int64", m["metadata"].(map[string]any)["generation"])
	}
	return m
}

var hash = map[string]string{"aigateway.envoyproxy.io/extproc-config-hash": "3f1c"}

// Cases is the table of Deployment states, shared with docs/readiness.md's account
// of the rule.
var cases = map[string]struct {
	reason string
	d      *appsv1.Deployment
	want   Verdict
}{
	"RolledOut": {
		reason: "Two replicas of the current template, both available.",
		d:      deployment(2, 2, hash, 2, 2, 2),
		want:   Verdict{Ready: true},
	},
	"FreshNothingAvailable": {
		reason: "A new Deployment: the controller counted the pods but none is available yet.",
		d:      deployment(1, 1, hash, 2, 2, 0),
		want:   Verdict{Failed: []Check{NoReplicaAvailable}},
	},
	"EmptyStatus": {
		reason: "A Deployment the controller has not looked at: every counter is absent.",
		d:      deployment(1, 0, nil, 0, 0, 0),
		want:   Verdict{Failed: []Check{GenerationNotObserved, ExtProcMarkerMissing, NoReplicaAvailable}},
	},
	"RollingUpdateOldPod": {
		reason: "A surge pod of the new template next to two old ones: old pods still serve without the sidecar.",
		d:      deployment(3, 3, hash, 3, 1, 2),
		want:   Verdict{Failed: []Check{OldReplicasPresent}},
	},
	"RollingUpdateCountersLookDone": {
		reason: "updated, ready and available all equal spec.replicas, but status.replicas still counts an old pod.",
		d:      deployment(3, 3, hash, 3, 2, 2),
		want:   Verdict{Failed: []Check{OldReplicasPresent}},
	},
	"EvictionReplacementPending": {
		reason: "One of two pods evicted under the PDB; its replacement is pending. The survivor runs the current template.",
		d:      deployment(2, 2, hash, 2, 2, 1),
		want:   Verdict{Ready: true},
	},
	"DrainedReplacementNotCounted": {
		reason: "One pod drained and its replacement not yet created: one replica reported, updated and available.",
		d:      deployment(2, 2, hash, 1, 1, 1),
		want:   Verdict{Ready: true},
	},
	"BothPodsDrained": {
		reason: "Both pods gone: nothing serves.",
		d:      deployment(2, 2, hash, 2, 2, 0),
		want:   Verdict{Failed: []Check{NoReplicaAvailable}},
	},
	"ScaledToZero": {
		reason: "spec.replicas 0: every counter is absent, so nothing serves.",
		d:      deployment(2, 2, hash, 0, 0, 0),
		want:   Verdict{Failed: []Check{NoReplicaAvailable}},
	},
	"MarkerMissing": {
		reason: "AI Gateway has not patched the template yet.",
		d:      deployment(1, 1, nil, 2, 2, 2),
		want:   Verdict{Failed: []Check{ExtProcMarkerMissing}},
	},
	"MarkerEmpty": {
		reason: "An empty marker is no marker.",
		d:      deployment(1, 1, map[string]string{"aigateway.envoyproxy.io/extproc-config-hash": ""}, 2, 2, 2),
		want:   Verdict{Failed: []Check{ExtProcMarkerMissing}},
	},
	"MarkerUUIDv1.0": {
		reason: "AI Gateway v1.0.0 writes only the uuid marker.",
		d:      deployment(1, 1, map[string]string{"aigateway.envoyproxy.io/uuid": "a-b-c"}, 2, 2, 2),
		want:   Verdict{Ready: true},
	},
	"MarkerVerifiedByFunction": {
		reason: "Neither AI Gateway marker, but the function's own: the function wrote it on evidence that every pod of the template has the sidecar.",
		d:      deployment(2, 2, map[string]string{VerifiedMarker: "2026-12-01T12:00:15Z"}, 2, 2, 2),
		want:   Verdict{Ready: true},
	},
	"MarkerVerifiedByFunctionEmpty": {
		reason: "An empty own marker is no marker either.",
		d:      deployment(2, 2, map[string]string{VerifiedMarker: ""}, 2, 2, 2),
		want:   Verdict{Failed: []Check{ExtProcMarkerMissing}},
	},
	"MarkerVerifiedByFunctionRollingIn": {
		reason: "The own marker is on the new template while old pods still serve: the rollout clause holds the rule.",
		d:      deployment(3, 3, map[string]string{VerifiedMarker: "2026-12-01T12:00:15Z"}, 3, 1, 2),
		want:   Verdict{Failed: []Check{OldReplicasPresent}},
	},
	"GenerationLagging": {
		reason: "The template changed and the controller has not caught up: its counters describe the old generation.",
		d:      deployment(4, 3, hash, 2, 2, 2),
		want:   Verdict{Failed: []Check{GenerationNotObserved}},
	},
}

func TestRuleEvaluate(t *testing.T) {
	r, err := For(markers)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		for dec, m := range map[string]map[string]any{"float64": asProviderSees(t, tc.d), "int64": asProviderV13Sees(t, tc.d)} {
			t.Run(name+"/"+dec, func(t *testing.T) {
				got, err := r.Evaluate(m)
				if err != nil {
					t.Fatalf("%s\nEvaluate(...): %v", tc.reason, err)
				}
				if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s\nEvaluate(...): -want, +got:\n%s", tc.reason, diff)
				}
			})
		}
	}
}

// TestProviderEnvironments evaluates Expression the way provider-kubernetes
// does, in its environment with and without optional types (v1.4 and v1.3),
// and checks it agrees with the function's verdict on every state.
func TestProviderEnvironments(t *testing.T) {
	r, err := For(markers)
	if err != nil {
		t.Fatal(err)
	}
	envs := map[string][]cel.EnvOption{"v1.3": nil, "v1.4": {cel.OptionalTypes()}}
	for envName, opts := range envs {
		env, err := NewEnv(opts...)
		if err != nil {
			t.Fatal(err)
		}
		ast, iss := env.Compile(r.Expression)
		if iss.Err() != nil {
			t.Fatalf("%s: celQuery does not compile: %v", envName, iss.Err())
		}
		if ast.OutputType() != cel.BoolType {
			t.Fatalf("%s: celQuery returns %s, provider-kubernetes wants bool", envName, ast.OutputType())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		// Numbers reach the query as float64 (encoding/json) or as int64
		// (util/json, what provider-kubernetes v1.3.1 uses); the verdict
		// must not depend on which.
		decoders := map[string]func(testing.TB, any) map[string]any{"float64": asProviderSees, "int64": asProviderV13Sees}
		for decName, decode := range decoders {
			for name, tc := range cases {
				t.Run(envName+"/"+decName+"/"+name, func(t *testing.T) {
					out, _, err := prg.Eval(map[string]any{"object": decode(t, tc.d)})
					if err != nil {
						t.Fatalf("provider evaluation: %v", err)
					}
					if got := out.Value().(bool); got != tc.want.Ready {
						t.Errorf("%s\nprovider says %v, function says %v", tc.reason, got, tc.want.Ready)
					}
				})
			}
		}
	}
}

func TestCompileErrors(t *testing.T) {
	cases := map[string]struct {
		markers []string
	}{
		"NoMarkers":   {markers: nil},
		"QuoteInKey":  {markers: []string{"a'b"}},
		"NotAnnotKey": {markers: []string{"has space"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := compile(tc.markers); err == nil {
				t.Errorf("compile(%q): want an error, got none", tc.markers)
			}
		})
	}
}

// TestVerifiedMarkerAlwaysAccepted checks that the function's own marker
// is part of the rule whatever the Input lists, exactly once, while the
// Input's keys stay as given.
func TestVerifiedMarkerAlwaysAccepted(t *testing.T) {
	own := map[string]string{VerifiedMarker: "2026-12-01T12:00:15Z"}
	cases := map[string]struct {
		reason  string
		markers []string
	}{
		"Defaults":      {reason: "The Input's default keys.", markers: markers},
		"CustomKey":     {reason: "An Input that names only its own key still accepts the function's.", markers: []string{"example.org/sidecar-hash"}},
		"ListedInInput": {reason: "An Input that lists the function's key too gets it once.", markers: []string{"aigateway.envoyproxy.io/uuid", VerifiedMarker}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r, err := For(tc.markers)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Count(r.Expression, "'"+VerifiedMarker+"' in"); got != 1 {
				t.Errorf("%s\nExpression tests %s %d times, want once: %s", tc.reason, VerifiedMarker, got, r.Expression)
			}
			for _, k := range tc.markers {
				if !strings.Contains(r.Expression, "'"+k+"' in") {
					t.Errorf("%s\nExpression does not test the Input's key %s: %s", tc.reason, k, r.Expression)
				}
			}
			got, err := r.Evaluate(asProviderSees(t, deployment(2, 2, own, 2, 2, 2)))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(Verdict{Ready: true}, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nEvaluate(own marker only): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
	t.Run("InputSliceUntouched", func(t *testing.T) {
		in := make([]string, 1, 4)
		in[0] = "example.org/sidecar-hash"
		if _, err := For(in); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"example.org/sidecar-hash"}, in); diff != "" {
			t.Errorf("For changed the Input's keys: -want, +got:\n%s", diff)
		}
		if got := in[:2][1]; got != "" {
			t.Errorf("For wrote %q into the spare capacity of the Input's slice", got)
		}
	})
}

func TestForCaches(t *testing.T) {
	a, err := For(markers)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := For(append([]string{}, markers...))
	if a != b {
		t.Errorf("For compiled the same rule twice")
	}
}

func BenchmarkEvaluateCached(b *testing.B) {
	d := asProviderSees(b, cases["RolledOut"].d)
	r, err := For(markers)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if v, err := r.Evaluate(d); err != nil || !v.Ready {
			b.Fatal(v, err)
		}
	}
}

func BenchmarkEvaluateCompilePerCall(b *testing.B) {
	d := asProviderSees(b, cases["RolledOut"].d)
	b.ReportAllocs()
	for b.Loop() {
		r, err := compile(markers)
		if err != nil {
			b.Fatal(err)
		}
		if v, err := r.Evaluate(d); err != nil || !v.Ready {
			b.Fatal(v, err)
		}
	}
}
