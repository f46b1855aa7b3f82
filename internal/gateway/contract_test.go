package gateway

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadRouteView(t *testing.T) {
	cases := map[string]struct {
		reason  string
		spec    map[string]any
		status  map[string]any
		want    RouteView
		wantErr string
	}{
		"Plain": {
			reason: "The provider config, no TLS.",
			spec:   map[string]any{"providerConfigName": "p"},
			want:   RouteView{ProviderConfigName: "p"},
		},
		"TLS": {
			reason: "spec.tls on: routes bind the https listener.",
			spec:   map[string]any{"providerConfigName": "p", "hostname": "llm.example.com", "tls": map[string]any{"certificateRefs": []any{map[string]any{"name": "c"}}}},
			want:   RouteView{ProviderConfigName: "p", TLS: true},
		},
		"EmptyTLS": {
			reason: "An empty spec.tls turns TLS on, as InferenceGatewaySpec.TLSEnabled reads it.",
			spec:   map[string]any{"providerConfigName": "p", "tls": map[string]any{}},
			want:   RouteView{ProviderConfigName: "p", TLS: true},
		},
		"InvalidElsewhere": {
			reason: "Fields readSpec refuses but a route does not read are ignored.",
			spec:   map[string]any{"providerConfigName": "p", "replicas": -1.0, "hostname": "Not A Host", "failover": map[string]any{"numRetries": 99.0}, "unknown": "x"},
			want:   RouteView{ProviderConfigName: "p"},
		},
		"ClientCertificate": {
			reason: "spec.backendTLS.clientCertificate: backends that require the gateway's client certificate can be served.",
			spec:   map[string]any{"providerConfigName": "p", "backendTLS": map[string]any{"clientCertificate": map[string]any{"issuerRef": map[string]any{"name": "ca"}}}},
			want:   RouteView{ProviderConfigName: "p", ClientCertificate: true},
		},
		"CallerAuth": {
			reason: "status.auth: the method the gateway enforces and its client IDs, for spec.access; never its spec.auth.",
			spec:   map[string]any{"providerConfigName": "p", "auth": map[string]any{"apiKey": map[string]any{}}},
			status: map[string]any{"auth": map[string]any{"method": "APIKey", "secrets": []any{"s"}, "clients": 2.0, "clientIDs": []any{"a", "b"}}},
			want:   RouteView{ProviderConfigName: "p", AuthMethod: "APIKey", ClientIDs: []string{"a", "b"}},
		},
		"CallerAuthOpen": {
			reason: "An open gateway says None.",
			spec:   map[string]any{"providerConfigName": "p"},
			status: map[string]any{"auth": map[string]any{"method": "None"}},
			want:   RouteView{ProviderConfigName: "p", AuthMethod: "None"},
		},
		"CallerAuthUnreadable": {
			reason: "A status.auth of another shape reads as not reported, not as an error: the route's spec.access says so.",
			spec:   map[string]any{"providerConfigName": "p"},
			status: map[string]any{"auth": "APIKey"},
			want:   RouteView{ProviderConfigName: "p"},
		},
		"BackendTLSNotObject": {
			reason:  "spec.backendTLS that is not an object says nothing of the client certificate.",
			spec:    map[string]any{"providerConfigName": "p", "backendTLS": "yes"},
			wantErr: "spec.backendTLS is a string",
		},
		"NoProvider": {
			reason:  "No provider config: no cluster to compose on.",
			spec:    map[string]any{"providerConfigName": " "},
			wantErr: "spec.providerConfigName is not set",
		},
		"TLSNotObject": {
			reason:  "spec.tls that is not an object says nothing of the listener.",
			spec:    map[string]any{"providerConfigName": "p", "tls": true},
			wantErr: "spec.tls is a bool",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ReadRouteView(map[string]any{"spec": tc.spec, "status": tc.status})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("%s\nReadRouteView(...): want an error containing %q, got %v", tc.reason, tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nReadRouteView(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nReadRouteView(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
