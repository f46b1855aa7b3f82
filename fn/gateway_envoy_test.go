package fn

import (
	"testing"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestEnvoySettings checks that spec.envoy reaches the EnvoyProxy and the
// Gateway: the drain timeout, the spread's action, the access log switched
// off, and the Envoy pods' ServiceAccount with its annotations.
func TestEnvoySettings(t *testing.T) {
	cases := map[string]struct {
		reason     string
		envoy      obj
		drain      gwapiv1.Duration
		action     corev1.UnsatisfiableConstraintAction
		accessLogs bool
		sa         *egv1a1.KubernetesServiceAccountSpec
		saNotes    map[gwapiv1.AnnotationKey]gwapiv1.AnnotationValue
	}{
		"Defaults": {
			reason: "Nothing set: 300 s, ScheduleAnyway, the JSON access log.",
			drain:  "300s", action: corev1.ScheduleAnyway, accessLogs: true,
		},
		"Custom": {
			reason: "Every setting changed.",
			envoy:  obj{"drainTimeout": "900s", "spread": obj{"whenUnsatisfiable": "DoNotSchedule"}, "accessLog": obj{"enabled": false}},
			drain:  "900s", action: corev1.DoNotSchedule,
		},
		"WorkloadIdentity": {
			reason: "The ServiceAccount's name goes to the EnvoyProxy, its annotations to the Gateway's infrastructure, where Envoy Gateway reads them.",
			envoy: obj{"serviceAccountName": "bedrock-invoker", "serviceAccountAnnotations": obj{
				"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/invoke",
			}},
			drain: "300s", action: corev1.ScheduleAnyway, accessLogs: true,
			sa:      &egv1a1.KubernetesServiceAccountSpec{Name: new("bedrock-invoker")},
			saNotes: map[gwapiv1.AnnotationKey]gwapiv1.AnnotationValue{"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/invoke"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := obj{"providerConfigName": "gpu-cluster-1"}
			if tc.envoy != nil {
				spec["envoy"] = tc.envoy
			}
			rsp := run(t, newRequest(t, gatewayXR(spec), nil, nil))
			ep := typedManifest[egv1a1.EnvoyProxySpec](t, manifest(rsp, "envoy-proxy"))
			if diff := cmp.Diff(&egv1a1.ShutdownConfig{DrainTimeout: &tc.drain}, ep.Shutdown); diff != "" {
				t.Errorf("%s\nshutdown: -want, +got:\n%s", tc.reason, diff)
			}
			for _, c := range ep.Provider.Kubernetes.EnvoyDeployment.Pod.TopologySpreadConstraints {
				if c.WhenUnsatisfiable != tc.action {
					t.Errorf("%s\nspread over %s: whenUnsatisfiable %s, want %s", tc.reason, c.TopologyKey, c.WhenUnsatisfiable, tc.action)
				}
			}
			if got := ep.Telemetry != nil; got != tc.accessLogs {
				t.Errorf("%s\naccess log set: %t, want %t", tc.reason, got, tc.accessLogs)
			}
			if diff := cmp.Diff(tc.sa, ep.Provider.Kubernetes.EnvoyServiceAccount); diff != "" {
				t.Errorf("%s\nenvoyServiceAccount: -want, +got:\n%s", tc.reason, diff)
			}
			gw := typedManifest[gwapiv1.GatewaySpec](t, manifest(rsp, "gateway"))
			if diff := cmp.Diff(tc.saNotes, gw.Infrastructure.Annotations); diff != "" {
				t.Errorf("%s\nthe Gateway's infrastructure annotations: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
