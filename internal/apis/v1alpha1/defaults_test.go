package v1alpha1_test

import (
	"encoding/json"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
)

// TestDefaultsMatchSchema ties every default of the generated XRDs, the
// +kubebuilder:default markers, to the Go constant the function applies
// when crossplane render leaves a field unset. A default the table lacks,
// a row the XRD lacks, or a value that differs fails.
func TestDefaultsMatchSchema(t *testing.T) {
	// Each XRD, by its folder: field path under the composite's root
	// (spec.x.y, [] for an array's items) to the Go value.
	want := map[string]map[string]any{
		"gateway": {
			"spec.replicas":                                    v1alpha1.DefaultReplicas,
			"spec.connection.bufferLimit":                      v1alpha1.DefaultBufferLimit.String(),
			"spec.failover.numRetries":                         v1alpha1.DefaultNumRetries,
			"spec.failover.panicThreshold":                     v1alpha1.DefaultPanicThreshold,
			"spec.envoy.drainTimeout":                          v1alpha1.DefaultDrainTimeout,
			"spec.envoy.spread.whenUnsatisfiable":              string(v1alpha1.DefaultWhenUnsatisfiable),
			"spec.envoy.accessLog.enabled":                     v1alpha1.DefaultAccessLogEnabled,
			"spec.auth.method":                                 v1alpha1.DefaultAuthMethod,
			"spec.budgets[].scope":                             v1alpha1.DefaultBudgetScope,
			"spec.backendTLS.clientCertificate.duration":       v1alpha1.DefaultClientCertDuration,
			"spec.backendTLS.clientCertificate.renewBefore":    v1alpha1.DefaultClientCertRenewBefore,
			"spec.backendTLS.clientCertificate.issuerRef.kind": v1alpha1.DefaultIssuerKind,
		},
		"route": routeDefaults,
	}
	for dir, rows := range want {
		t.Run(dir, func(t *testing.T) {
			got := map[string]any{}
			walk(rootSchema(t, dir), "", func(path string, s apiextensionsv1.JSONSchemaProps) {
				if s.Default == nil {
					return
				}
				var v any
				if err := json.Unmarshal(s.Default.Raw, &v); err != nil {
					t.Fatalf("%s: cannot read the default %s: %v", path, s.Default.Raw, err)
				}
				got[path] = v
			})
			norm := map[string]any{}
			for path, v := range rows {
				b, err := json.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				var n any
				if err := json.Unmarshal(b, &n); err != nil {
					t.Fatal(err)
				}
				norm[path] = n
			}
			if diff := cmp.Diff(norm, got); diff != "" {
				t.Errorf("the XRD's defaults differ from the Go constants: -Go, +XRD:\n%s", diff)
			}
			if len(got) == 0 {
				t.Error("the XRD has no defaults; is it the right file?")
			}
			paths := make([]string, 0, len(got))
			for p := range got {
				paths = append(paths, p)
			}
			sort.Strings(paths)
			t.Logf("defaults checked: %v", paths)
		})
	}
}
