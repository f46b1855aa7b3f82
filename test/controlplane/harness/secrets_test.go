package harness

import (
	"encoding/base64"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestFindSecrets checks the leak finder on its own: a key in a manifest,
// plain or base64, anywhere, is found with its path; a redacted one is not.
func TestFindSecrets(t *testing.T) {
	w := &World{tb: t}
	w.Forbid("the key", base64.StdEncoding.EncodeToString([]byte("sk-test-1")))
	obj := func(m map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: m} }
	for _, tc := range []struct {
		name string
		u    *unstructured.Unstructured
		want map[string][]string
	}{{
		name: "base64 in the desired manifest",
		u:    obj(map[string]any{"spec": map[string]any{"forProvider": map[string]any{"manifest": map[string]any{"data": map[string]any{"apiKey": "c2stdGVzdC0x"}}}}}),
		want: map[string][]string{"the key (base64)": {".spec.forProvider.manifest.data.apiKey"}},
	}, {
		name: "plain in a status message",
		u:    obj(map[string]any{"status": map[string]any{"conditions": []any{map[string]any{"message": "cannot apply: sk-test-1 is bad"}}}}),
		want: map[string][]string{"the key (plain)": {".status.conditions[0].message"}},
	}, {
		name: "redacted by --sanitize-secrets",
		u:    obj(map[string]any{"status": map[string]any{"atProvider": map[string]any{"manifest": map[string]any{"data": map[string]any{"redacted": nil}}}}}),
		want: map[string][]string{},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FindSecrets(tc.u, w.Secrets); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("findSecrets() = %v, want %v", got, tc.want)
			}
		})
	}
}
