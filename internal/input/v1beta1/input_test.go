package v1beta1

import (
	"strings"
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

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		in      *Input
		wantErr string
	}{
		"Defaults":            {in: &Input{}},
		"Custom":              {in: &Input{GatewayNamespace: "ai-gw", GatewayName: "edge", GatewayClassName: "eg.example.org", AnchorHeader: &Header{Name: "X-Anchor", Value: "yes"}, InferenceGatewayAPIVersion: "platform.example.org/v1"}},
		"GatewayNameNotLabel": {in: &Input{GatewayName: "Edge_1"}, wantErr: `cannot use the function Input: gatewayName "Edge_1" is not a DNS label`},
		"GatewayNamespaceDot": {in: &Input{GatewayNamespace: "a.b"}, wantErr: `cannot use the function Input: gatewayNamespace "a.b" is not a DNS label`},
		"ObjectNamespaceLong": {in: &Input{ObjectNamespace: strings.Repeat("a", 64)}, wantErr: `objectNamespace "` + strings.Repeat("a", 64) + `" is not a DNS label`},
		"EnvoyNamespace":      {in: &Input{EnvoyGatewayNamespace: "-x"}, wantErr: `envoyGatewayNamespace "-x" is not a DNS label`},
		"ClassName":           {in: &Input{GatewayClassName: "Envoy Class"}, wantErr: `gatewayClassName "Envoy Class" is not a GatewayClass name`},
		"ClusterDomain":       {in: &Input{ClusterDomain: "cluster local"}, wantErr: `clusterDomain "cluster local" is not a DNS name`},
		"MarkerKey":           {in: &Input{ExtProcMarkerAnnotations: []string{"ok.example.org/a", "bad key"}}, wantErr: `extProcMarkerAnnotations[1] "bad key" is not an annotation key`},
		"AnchorIsModelHeader": {in: &Input{AnchorHeader: &Header{Name: "X-AI-EG-Model", Value: "true"}}, wantErr: `anchorHeader.name "X-AI-EG-Model" is the header AI Gateway routes models on`},
		"AnchorNameToken":     {in: &Input{AnchorHeader: &Header{Name: "x anchor", Value: "true"}}, wantErr: `anchorHeader.name "x anchor" is not an HTTP header name`},
		"AnchorValueCRLF":     {in: &Input{AnchorHeader: &Header{Name: "x-anchor", Value: "a\r\nx-ai-eg-model: m"}}, wantErr: `anchorHeader.value is not a header value of 1 to 4096 characters without control characters`},
		"AnchorValueEmpty":    {in: &Input{AnchorHeader: &Header{Name: "x-anchor"}}, wantErr: `anchorHeader.value is not a header value`},
		"APIVersion":          {in: &Input{InferenceGatewayAPIVersion: "v1alpha1"}, wantErr: `inferenceGatewayAPIVersion "v1alpha1" is not an apiVersion of the form <group>/<version>`},
		"NegativeCooldown":    {in: &Input{CircuitBreakerCooldown: &metav1.Duration{Duration: -time.Minute}}, wantErr: `circuitBreakerCooldown -1m0s is negative`},
		"ZeroCooldown":        {in: &Input{CircuitBreakerCooldown: &metav1.Duration{}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.in.WithDefaults().Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tc.wantErr == "" && got != "" || !strings.Contains(got, tc.wantErr) {
				t.Errorf("Validate(): want an error containing %q, got %q", tc.wantErr, got)
			}
		})
	}
}
