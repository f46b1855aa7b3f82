package fn

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// TestWire checks that what Wire sends is, once decoded as Crossplane
// decodes it, the response RunFunction returns, on a composite's first
// reconcile (every Struct new to the cache) and on the next (every Struct
// from it), and that it did send the cached Structs precoded.
func TestWire(t *testing.T) {
	cases := map[string]struct {
		reason string
		req    *fnv1.RunFunctionRequest
		// asStructs names the desired resources sent as Structs, not
		// precoded: those carried forward. Every other is precoded.
		asStructs []string
		// fatal: the response is Fatal and desires nothing.
		fatal bool
	}{
		"RolledOutGateway": {
			reason: "A rolled-out gateway's twelve Objects are all built, so all are sent precoded.",
			req:    newRequest(t, gatewayXR(nil), observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true), nil),
		},
		"NewGateway": {
			reason: "A new gateway's first Objects are sent precoded too.",
			req:    newRequest(t, gatewayXR(nil), nil, nil),
		},
		"ModelRoute16": {
			reason: "A ModelRoute of 16 keyed backends: every Object it builds is sent precoded.",
			req:    routeRequest(t, 16),
		},
		"CarriedForward": {
			reason: "A gateway whose TLS Secret is gone carries its copy forward from what was observed: " +
				"that one is not the cache's and goes out as a Struct, the rest precoded.",
			req:       newRequest(t, gatewayXR(tlsSpec), observedTLSGateway(true), map[string][]obj{"tls-secret-llm-tls": {}}),
			asStructs: []string{"tls-secret-llm-tls"},
		},
		"Fatal": {
			reason: "A Fatal response has no desired resources to precode.",
			req:    newRequest(t, gatewayXR(obj{"replicas": 2}), nil, nil),
			fatal:  true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// One clock for both: the statuses record times.
			now := time.Now()
			want, err := newAt(now).RunFunction(t.Context(), proto.CloneOf(tc.req))
			if err != nil {
				t.Fatalf("%s\nRunFunction returned an error: %v", tc.reason, err)
			}
			w := newAt(now).Wire()
			for _, call := range []string{"first", "second"} {
				got, err := w.RunFunction(t.Context(), proto.CloneOf(tc.req))
				if err != nil {
					t.Fatalf("%s\n%s call: RunFunction returned an error: %v", tc.reason, call, err)
				}
				for n, r := range got.GetDesired().GetResources() {
					precoded := r.GetResource() == nil && len(r.ProtoReflect().GetUnknown()) > 0
					if want := !slices.Contains(tc.asStructs, n); precoded != want {
						t.Errorf("%s\n%s call: %q sent precoded: %t, want %t", tc.reason, call, n, precoded, want)
					}
				}
				// A case that desires nothing would show nothing precoded.
				fatal := len(got.GetResults()) > 0 && got.GetResults()[0].GetSeverity() == fnv1.Severity_SEVERITY_FATAL
				desired := len(got.GetDesired().GetResources())
				if fatal != tc.fatal || (desired == 0) != tc.fatal {
					t.Errorf("%s\n%s call: Fatal %t with %d desired resources, want Fatal %t and desired resources %t", tc.reason, call, fatal, desired, tc.fatal, !tc.fatal)
				}
				b, err := proto.Marshal(got)
				if err != nil {
					t.Fatalf("%s\n%s call: cannot encode the response: %v", tc.reason, call, err)
				}
				decoded := &fnv1.RunFunctionResponse{}
				if err := proto.Unmarshal(b, decoded); err != nil {
					t.Fatalf("%s\n%s call: cannot decode the response: %v", tc.reason, call, err)
				}
				if diff := cmp.Diff(want, decoded, protocmp.Transform()); diff != "" {
					t.Errorf("%s\n%s call: decoded response (-RunFunction +Wire):\n%s", tc.reason, call, diff)
				}
			}
		})
	}
}
