package fn

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGatewayListeners covers the listeners of the Gateway: every listener
// the function composes (http, and https with TLS) must be reported by
// Envoy Gateway, Programmed, with its references resolved, for the
// Gateway's current generation; otherwise GatewayReady is False with
// ListenersNotProgrammed, naming the listener, the condition, and Envoy
// Gateway's reason and message, and the Gateway's Object is not Ready.
func TestGatewayListeners(t *testing.T) {
	invalidCert := listenerStatus("https", false, "InvalidCertificateRef", "No valid secrets exist: certificate refs 0: Secret modelplane-system/llm-tls must contain tls.crt and tls.key.")
	withListeners := func(gen int, ls ...obj) obj {
		m := gatewayManifest("203.0.113.10")
		m["metadata"].(obj)["generation"] = gen
		l := make([]any, len(ls))
		for i := range ls {
			l[i] = ls[i]
		}
		m["status"].(obj)["listeners"] = l
		return m
	}
	cases := map[string]struct {
		reason  string
		tls     bool
		gateway obj
		// want is GatewayReady as "Status/Reason"; message its parts.
		want    string
		message []string
		// ready is the Gateway Object's desired readiness.
		ready string
	}{
		"PlainProgrammed": {
			reason:  "Without TLS only the http listener is composed; it is programmed: Serving.",
			gateway: withListeners(1, listenerStatus("http", true, "", "")),
			want:    "STATUS_CONDITION_TRUE/Serving", message: []string{"every listener programmed"}, ready: "READY_TRUE",
		},
		"TLSProgrammed": {
			reason:  "With TLS both listeners are programmed: Serving.",
			tls:     true,
			gateway: withListeners(1, listenerStatus("http", true, "", ""), listenerStatus("https", true, "", "")),
			want:    "STATUS_CONDITION_TRUE/Serving", ready: "READY_TRUE",
		},
		"InvalidCertificate": {
			reason:  "Envoy Gateway rejects the certificate: the https listener is ResolvedRefs=False and Programmed=False while the Gateway keeps its address.",
			tls:     true,
			gateway: withListeners(1, listenerStatus("http", true, "", ""), invalidCert),
			want:    "STATUS_CONDITION_FALSE/ListenersNotProgrammed",
			message: []string{
				`the listener "https" is Programmed=False (Invalid): Listener is invalid, see other Conditions for details.`,
				`the listener "https" is ResolvedRefs=False (InvalidCertificateRef): No valid secrets exist: certificate refs 0: Secret modelplane-system/llm-tls must contain tls.crt and tls.key.`,
			},
			ready: "READY_FALSE",
		},
		"HTTPSNotReported": {
			reason:  "TLS was just enabled: Envoy Gateway has reported only the http listener, so https counts as not programmed.",
			tls:     true,
			gateway: withListeners(1, listenerStatus("http", true, "", "")),
			want:    "STATUS_CONDITION_FALSE/ListenersNotProgrammed", message: []string{`Envoy Gateway has not reported the listener "https" yet`}, ready: "READY_FALSE",
		},
		"NoListenersReported": {
			reason:  "The Gateway has an address but no listener status yet.",
			gateway: withListeners(1),
			want:    "STATUS_CONDITION_FALSE/ListenersNotProgrammed", message: []string{`Envoy Gateway has not reported the listener "http" yet`}, ready: "READY_FALSE",
		},
		"StaleGeneration": {
			reason:  "The Gateway changed (generation 2) and Envoy Gateway has only judged generation 1: its verdict is stale.",
			gateway: withListeners(2, listenerStatus("http", true, "", "")),
			want:    "STATUS_CONDITION_FALSE/ListenersNotProgrammed", message: []string{`the listener "http"'s Programmed is for generation 1 of the Gateway, not 2`}, ready: "READY_FALSE",
		},
		"ConditionMissing": {
			reason: "A listener entry without ResolvedRefs counts as not programmed.",
			gateway: func() obj {
				l := listenerStatus("http", true, "", "")
				l["conditions"] = l["conditions"].([]any)[:1]
				return withListeners(1, l)
			}(),
			want: "STATUS_CONDITION_FALSE/ListenersNotProgrammed", message: []string{`Envoy Gateway has not reported ResolvedRefs for the listener "http" yet`}, ready: "READY_FALSE",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := obj(nil)
			observed := observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true)
			required := map[string][]obj(nil)
			if tc.tls {
				spec = tlsSpec
				observed = observedTLSGateway(true)
				required = map[string][]obj{"tls-secret-llm-tls": {tlsSecret(true, true)}}
			}
			observed["gateway"] = object("gateway", tc.gateway, true, true)
			rsp := run(t, newRequest(t, gatewayXR(spec), observed, required))
			c := condition(rsp, "GatewayReady")
			got := c.GetStatus().String() + "/" + c.GetReason()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nGatewayReady: -want, +got:\n%s\nmessage: %s", tc.reason, diff, c.GetMessage())
			}
			for _, m := range tc.message {
				if !strings.Contains(c.GetMessage(), m) {
					t.Errorf("%s\nGatewayReady message %q does not contain %q", tc.reason, c.GetMessage(), m)
				}
			}
			if diff := cmp.Diff(tc.ready, rsp.GetDesired().GetResources()["gateway"].GetReady().String()); diff != "" {
				t.Errorf("%s\nthe Gateway Object's readiness: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
