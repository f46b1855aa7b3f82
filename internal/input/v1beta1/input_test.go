package v1beta1

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWithDefaults(t *testing.T) {
	defaults := &Input{
		GatewayNamespace:         "modelplane-system",
		GatewayName:              "inference-gateway",
		ObjectNamespace:          "modelplane-system",
		GatewayClassName:         "envoy",
		EnvoyGatewayNamespace:    "envoy-gateway-system",
		ExtProcMarkerAnnotations: []string{markerConfigHash, markerUUID},
		AnchorHeader:             &Header{Name: "x-modelplane-gateway-anchor", Value: "true"},
		ClusterDomain:            "cluster.local",
		CircuitBreakerCooldown:   &metav1.Duration{Duration: 5 * time.Minute},
	}
	cases := map[string]struct {
		reason string
		in     *Input
		want   *Input
	}{
		"Nil":   {reason: "No Input: every default.", in: nil, want: defaults},
		"Empty": {reason: "An empty Input: every default.", in: &Input{}, want: defaults},
		"Overrides": {
			reason: "Set fields win; the gateway namespace and the Objects' namespace stay separate settings.",
			in:     &Input{GatewayNamespace: "gw", ObjectNamespace: "platform", ExtProcMarkerAnnotations: []string{"example.org/marker"}},
			want: func() *Input {
				w := defaults.DeepCopy()
				w.GatewayNamespace, w.ObjectNamespace, w.ExtProcMarkerAnnotations = "gw", "platform", []string{"example.org/marker"}
				return w
			}(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var before *Input
			if tc.in != nil {
				before = tc.in.DeepCopy()
			}
			got := tc.in.WithDefaults()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nWithDefaults(): -want, +got:\n%s", tc.reason, diff)
			}
			if tc.in != nil && !cmp.Equal(before, tc.in) {
				t.Errorf("%s\nWithDefaults() changed its receiver", tc.reason)
			}
		})
	}
}
