package fn

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
)

// TestRouteFollowsItsSources checks the watched ConfigMap through which a
// rotated API key or CA, or one created after its route, wakes the
// ModelRoute: one reference per control-plane Secret or ConfigMap the
// route copies (each once, though two backends share it), each copying
// only its resourceVersion, and only once the provider has finalized the
// Object; watched, so the provider watches them; and no such Object for a
// route that copies nothing.
func TestRouteFollowsItsSources(t *testing.T) {
	ref := func(kind, name string) any {
		return obj{
			"patchesFrom": obj{"apiVersion": "v1", "kind": kind, "name": name, "namespace": "ml-team", "fieldPath": "metadata.resourceVersion"},
			"toFieldPath": "data[" + map[string]string{"Secret": "secret", "ConfigMap": "configmap"}[kind] + "." + name + "]",
		}
	}
	cases := map[string]struct {
		reason   string
		backends []obj
		required map[string][]obj
		// firstTime: the sources Object has not been observed yet.
		firstTime bool
		// want is the Object's references; nil: no sources Object, unless
		// firstTime, when it is desired without any.
		want []any
	}{
		"FirstTimeNoReferences": {
			reason:    "Not observed yet: composed without references, since the provider's first reconcile of an Object puts a finalizer on everything it references, which would keep the team's Secret from being deleted.",
			backends:  []obj{backend("a", 0, 1, "key-a")},
			required:  map[string][]obj{"secret-key-a": keyA},
			firstTime: true,
		},
		"OneKey": {
			reason:   "One keyed backend, one keyless: the one API-key Secret.",
			backends: []obj{backend("a", 0, 1, "key-a"), backend("b", 0, 1, "")},
			required: map[string][]obj{"secret-key-a": keyA},
			want:     []any{ref("Secret", "key-a")},
		},
		"SharedKey": {
			reason:   "Two backends share a Secret: it is followed once.",
			backends: []obj{backend("a", 0, 1, "key-a"), backend("b", 1, 1, "key-a")},
			required: map[string][]obj{"secret-key-a": keyA},
			want:     []any{ref("Secret", "key-a")},
		},
		"KeyNotThereYet": {
			reason:   "The Secret does not exist yet: it is followed all the same, so that its creation wakes the route.",
			backends: []obj{backend("a", 0, 1, "key-a")},
			required: map[string][]obj{"secret-key-a": {}},
			want:     []any{ref("Secret", "key-a")},
		},
		"CAConfigMap": {
			reason:   "A CA in a ConfigMap is copied by the function, which must see it change.",
			backends: []obj{mtlsBackend("ConfigMap", false)},
			required: map[string][]obj{"ca-configmap-m-ca": {caConfigMap()}},
			want:     []any{ref("ConfigMap", "m-ca")},
		},
		"CASecretAndKey": {
			reason:   "A CA in a Secret and an API key: both, in the order of the spec.",
			backends: []obj{mtlsBackend("Secret", false), backend("a", 0, 1, "key-a")},
			required: map[string][]obj{"ca-secret-m-ca": {caSecret()}, "secret-key-a": keyA},
			want:     []any{ref("Secret", "m-ca"), ref("Secret", "key-a")},
		},
		"NothingCopied": {
			reason:   "No key, no CA: nothing to follow, no Object.",
			backends: []obj{backend("b", 0, 1, "")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := map[string][]obj{"gateway": gwReady}
			maps.Copy(req, tc.required)
			observed := observedRoute(true)
			if tc.firstTime {
				delete(observed, "sources")
			}
			rsp := run(t, newRequest(t, routeXR(tc.backends...), observed, req))
			r := rsp.GetDesired().GetResources()["sources"]
			if tc.want == nil && !tc.firstTime {
				if r != nil {
					t.Fatalf("%s\na sources Object is desired, want none", tc.reason)
				}
				return
			}
			if r == nil {
				t.Fatalf("%s\nno sources Object is desired", tc.reason)
			}
			spec := r.GetResource().AsMap()["spec"].(obj)
			refs, _ := spec["references"].([]any)
			if diff := cmp.Diff(tc.want, refs); diff != "" {
				t.Errorf("%s\nsources references: -want, +got:\n%s", tc.reason, diff)
			}
			if spec["watch"] != true {
				t.Errorf("%s\nsources Object: spec.watch is %v, want true: without it the provider watches none of its references", tc.reason, spec["watch"])
			}
			want := obj{"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj{"name": "qwen-sources", "namespace": names.TeamNamespace("ml-team")}}
			if diff := cmp.Diff(want, manifest(rsp, "sources")); diff != "" {
				t.Errorf("%s\nsources manifest: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
