package remote

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"
)

func mustStruct(t *testing.T, j string) *structpb.Struct {
	t.Helper()
	s := &structpb.Struct{}
	if err := s.UnmarshalJSON([]byte(j)); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCarry(t *testing.T) {
	observed := map[string]any{}
	if err := json.Unmarshal([]byte(`{
		"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "Object",
		"metadata": {"name": "r-1", "namespace": "ml-team", "labels": {"a": "b"}, "annotations": {"crossplane.io/composition-resource-name": "route"},
			"uid": "u", "resourceVersion": "7", "generation": 3, "managedFields": [{}], "ownerReferences": [{}], "creationTimestamp": "2026-01-01T00:00:00Z"},
		"spec": {"forProvider": {"manifest": {"kind": "AIGatewayRoute"}}},
		"status": {"conditions": [{"type": "Ready", "status": "True"}]}
	}`), &observed); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "Object",
		"metadata": map[string]any{"name": "r-1", "namespace": "ml-team", "labels": map[string]any{"a": "b"}, "annotations": map[string]any{"crossplane.io/composition-resource-name": "route"}},
		"spec":     map[string]any{"forProvider": map[string]any{"manifest": map[string]any{"kind": "AIGatewayRoute"}}},
	}
	if diff := cmp.Diff(want, Carry(observed)); diff != "" {
		t.Errorf("Carry keeps only the desired parts: -want, +got:\n%s", diff)
	}
}

func TestRead(t *testing.T) {
	cases := map[string]struct {
		reason   string
		object   string
		live     bool
		reported bool
		synced   Condition
		wantErr  bool
	}{
		"NotReported": {reason: "A new Object has no status.", object: `{"kind":"Object"}`},
		"Live": {
			reason: "Synced with a manifest is live.",
			object: `{"status":{"conditions":[{"type":"Synced","status":"True","reason":"ReconcileSuccess"}],"atProvider":{"manifest":{"kind":"Deployment"}}}}`,
			live:   true, reported: true,
			synced: Condition{Status: "True", Reason: "ReconcileSuccess"},
		},
		"Stale": {
			reason:   "A manifest with Synced=False is stale: the remote object may be gone.",
			object:   `{"status":{"conditions":[{"type":"Synced","status":"False","reason":"ReconcileError","message":"external resource does not exist"}],"atProvider":{"manifest":{"kind":"Deployment"}}}}`,
			reported: true,
			synced:   Condition{Status: "False", Reason: "ReconcileError", Message: "external resource does not exist"},
		},
		"NullManifest":      {reason: "null is no manifest.", object: `{"status":{"atProvider":{"manifest":null}}}`},
		"ConditionsNotList": {reason: "Malformed conditions are an error.", object: `{"status":{"conditions":"x"}}`, wantErr: true},
		"ManifestNotObject": {reason: "A malformed manifest is an error.", object: `{"status":{"atProvider":{"manifest":"x"}}}`, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o, err := Read(mustStruct(t, tc.object))
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nRead(...): error %v, want error %v", tc.reason, err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if o.Live() != tc.live || o.Reported() != tc.reported {
				t.Errorf("%s\nLive()=%v Reported()=%v, want %v %v", tc.reason, o.Live(), o.Reported(), tc.live, tc.reported)
			}
			if diff := cmp.Diff(tc.synced, o.Synced); diff != "" {
				t.Errorf("%s\nSynced: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
