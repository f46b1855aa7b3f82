package gateway

import (
	"strings"
	"testing"
)

func TestReadSpec(t *testing.T) {
	cases := map[string]struct {
		reason  string
		spec    map[string]any
		wantErr string
	}{
		"Minimal":         {reason: "providerConfigName alone is enough.", spec: map[string]any{"providerConfigName": "p"}},
		"TLS":             {reason: "TLS with a hostname and a certificate.", spec: map[string]any{"providerConfigName": "p", "hostname": "llm.example.com", "tls": map[string]any{"certificateRefs": []any{map[string]any{"name": "c"}}}}},
		"NoProvider":      {reason: "providerConfigName is required.", spec: map[string]any{}, wantErr: "spec.providerConfigName is required"},
		"BlankProvider":   {reason: "Blank is missing.", spec: map[string]any{"providerConfigName": " "}, wantErr: "spec.providerConfigName is required"},
		"NegativeReplica": {reason: "Replicas cannot be negative.", spec: map[string]any{"providerConfigName": "p", "replicas": -1.0}, wantErr: "spec.replicas is -1"},
		"BadHostname":     {reason: "A hostname must be a DNS name.", spec: map[string]any{"providerConfigName": "p", "hostname": "Not A Host"}, wantErr: `spec.hostname "Not A Host" is not a hostname`},
		"TLSNoCerts":      {reason: "TLS needs a certificate.", spec: map[string]any{"providerConfigName": "p", "hostname": "a.b", "tls": map[string]any{}}, wantErr: "spec.tls.certificateRefs is empty"},
		"TLSEmptyName":    {reason: "A certificate ref needs a name.", spec: map[string]any{"providerConfigName": "p", "hostname": "a.b", "tls": map[string]any{"certificateRefs": []any{map[string]any{}}}}, wantErr: "spec.tls.certificateRefs[0].name is empty"},
		"Envoy": {reason: "Every Envoy setting.", spec: map[string]any{"providerConfigName": "p", "envoy": map[string]any{
			"drainTimeout": "10m", "spread": map[string]any{"whenUnsatisfiable": "DoNotSchedule"}, "accessLog": map[string]any{"enabled": false},
		}}},
		"DrainNotDuration": {reason: "The drain timeout is a Gateway API duration.", spec: map[string]any{"providerConfigName": "p", "envoy": map[string]any{"drainTimeout": "5 minutes"}}, wantErr: `spec.envoy.drainTimeout "5 minutes" is not a duration`},
		"DrainGoOnly":      {reason: "Go durations Gateway API refuses are refused.", spec: map[string]any{"providerConfigName": "p", "envoy": map[string]any{"drainTimeout": "1.5m"}}, wantErr: "spec.envoy.drainTimeout"},
		"DrainTooLong":     {reason: "At most an hour.", spec: map[string]any{"providerConfigName": "p", "envoy": map[string]any{"drainTimeout": "2h"}}, wantErr: "from 1s to 1h"},
		"DrainZero":        {reason: "At least a second.", spec: map[string]any{"providerConfigName": "p", "envoy": map[string]any{"drainTimeout": "0s"}}, wantErr: "from 1s to 1h"},
		"SpreadUnknown":    {reason: "Only the two Kubernetes actions.", spec: map[string]any{"providerConfigName": "p", "envoy": map[string]any{"spread": map[string]any{"whenUnsatisfiable": "Sometimes"}}}, wantErr: `spec.envoy.spread.whenUnsatisfiable is "Sometimes"`},
		"UnknownField":     {reason: "A field the function does not know is an error, not silently ignored.", spec: map[string]any{"providerConfigName": "p", "envoy": map[string]any{"drainTimout": "10m"}}, wantErr: "cannot read InferenceGateway: spec.envoy.drainTimout is not a field of InferenceGateway"},
		"CrossplaneFields": {reason: "Crossplane's own spec.crossplane is tolerated.", spec: map[string]any{"providerConfigName": "p", "crossplane": map[string]any{"compositionRef": map[string]any{"name": "c"}, "resourceRefs": []any{}}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := readSpec(map[string]any{"spec": tc.spec})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("%s\nreadSpec(...): %v", tc.reason, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("%s\nreadSpec(...): want an error containing %q, got %v", tc.reason, tc.wantErr, err)
			}
		})
	}
}
