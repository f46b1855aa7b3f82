package remote

import (
	"encoding/json"
	"fmt"
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

// TestLookups checks that the lookups that read an Observed's manifests
// straight from the protobuf message agree with reading the maps Manifest
// and Applied convert them to.
func TestLookups(t *testing.T) {
	const object = `{"spec":{"forProvider":{"manifest":{"metadata":{"annotations":{"a":"applied"}}}}},` +
		`"status":{"atProvider":{"manifest":{"metadata":{"generation":7,"annotations":{"a":"live","n":3}},"status":{"x":[1]}}}}}`
	o, err := Read(mustStruct(t, object))
	if err != nil {
		t.Fatal(err)
	}
	empty, err := Read(mustStruct(t, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		LiveString, AppliedString string
		LiveGeneration            int64
		Status                    any
		Whole                     any
	}
	cases := map[string]struct {
		reason string
		o      Observed
		path   []string
		want   got
	}{
		"Found": {
			reason: "A string at the path, in each manifest, and the generation as an integer.",
			o:      o, path: []string{"metadata", "annotations", "a"},
			want: got{LiveString: "live", AppliedString: "applied", LiveGeneration: 7, Status: o.Manifest()["status"], Whole: o.Manifest()},
		},
		"NotAString": {
			reason: "A number where a string is looked up is no string, as unstructured.NestedString says.",
			o:      o, path: []string{"metadata", "annotations", "n"},
			want: got{LiveGeneration: 7, Status: o.Manifest()["status"], Whole: o.Manifest()},
		},
		"Missing": {
			reason: "A path through a missing or non-object field is nothing.",
			o:      o, path: []string{"metadata", "generation", "deeper"},
			want: got{LiveGeneration: 7, Status: o.Manifest()["status"], Whole: o.Manifest()},
		},
		"NoManifest": {
			reason: "An Object the provider has not reported on has nothing at any path.",
			o:      empty, path: []string{"metadata", "annotations", "a"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := got{
				LiveString: tc.o.LiveString(tc.path...), AppliedString: tc.o.AppliedString(tc.path...),
				LiveGeneration: tc.o.LiveGeneration(),
				Status:         tc.o.LiveAt("status").AsInterface(), Whole: tc.o.LiveAt().AsInterface(),
			}
			if tc.want.Whole == nil {
				// A nil Value converts to a null, as a missing field
				// reads as nil.
				tc.want.Status, tc.want.Whole = g.Status, g.Whole
				if tc.o.LiveAt() != nil || tc.o.LiveAt("status") != nil {
					t.Errorf("%s\nLiveAt(...): want nil without a manifest", tc.reason)
				}
			}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCopyStateIn(t *testing.T) {
	const referencing = `{"metadata":{"finalizers":["finalizer.managedresource.crossplane.io"]%s},` +
		`"spec":{"references":[{"patchesFrom":{"apiVersion":"v1","kind":"Secret","name":"s","fieldPath":"data.k"}}]}}`
	read := func(extra string) Observed {
		o, err := Read(mustStruct(t, fmt.Sprintf(referencing, extra)))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	cases := map[string]struct {
		reason string
		obs    map[string]Observed
		want   CopyState
	}{
		"NotObserved": {
			reason: "An Object not observed yet may not carry references: it would be created with them.",
		},
		"Referencing": {
			reason: "An Object that carries its references keeps them.",
			obs:    map[string]Observed{"copy": read("")},
			want:   CopyState{MayReference: true},
		},
		"BeingDeleted": {
			reason: "An Object being deleted is composed as a new one: desired again, it is created anew, and with references the provider would write the values into it.",
			obs:    map[string]Observed{"copy": read(`,"deletionTimestamp":"2026-12-08T01:01:37Z"`)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, CopyStateIn(tc.obs, "copy")); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
