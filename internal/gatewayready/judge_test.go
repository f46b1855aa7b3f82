package gatewayready

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/modelplaneai/function-inference-gateway/internal/input/v1beta1"
	"github.com/modelplaneai/function-inference-gateway/internal/rollout"
)

// TestJudgeSecretFedFeatures checks the verdict on what package gateway read
// of its Secrets, with nothing observed on the gateway cluster yet: the
// feature's problem leads (the conditions table puts them before the
// Gateway's), a renewal or a CA lost after issue holds nothing, and a
// caller Secret's own problem is a warning while another serves. The
// expected reasons and messages are written out.
func TestJudgeSecretFedFeatures(t *testing.T) {
	in := (&v1beta1.Input{}).WithDefaults()
	rule, err := rollout.For(in.ExtProcMarkerAnnotations)
	if err != nil {
		t.Fatal(err)
	}
	g := Gateway{In: in, Listeners: []string{"http"}, Resources: Resources{Gateway: "gateway", CallerAuth: "caller-auth"}}
	type want struct {
		reason   string
		first    string // the condition's message starts with it
		contains string // and holds it
		notices  []string
		warnings []string
	}
	cases := map[string]struct {
		in   Input
		want want
	}{
		"NothingObserved": {
			want: want{reason: ReasonNotProgrammed, first: `the Gateway "` + in.GatewayName + `" in "` + in.GatewayNamespace + `" has not been observed on the gateway cluster yet`},
		},
		"TLSSecretWithProblem": {
			in:   Input{TLS: []Secret{{Name: "tls", Problem: "the TLS Secret \"tls\" holds the key of another certificate"}}},
			want: want{reason: ReasonTLSSecretMissing, first: `the TLS Secret "tls" holds the key of another certificate`},
		},
		"TLSSecretNotFetched": {
			in:   Input{TLS: []Secret{{Name: "tls"}}},
			want: want{reason: ReasonTLSSecretMissing, first: `the TLS Secret "tls" has not been fetched from the control plane yet`},
		},
		"TLSSecretNotDelivered": {
			in:   Input{TLS: []Secret{{Name: "tls", Present: true}}},
			want: want{reason: ReasonTLSSecretMissing, first: `the TLS Secret "tls" has not reached the gateway cluster yet`},
		},
		"TLSSecretRenewing": {
			in: Input{TLS: []Secret{{Name: "tls", Present: true, Serving: true, Renewing: true, Version: "2", LiveVersion: "1"}}},
			want: want{reason: ReasonNotProgrammed, first: "the Gateway", notices: []string{
				`a new version of the TLS Secret "tls" (resourceVersion 2) is being delivered to the gateway cluster; the https listener serves the version delivered before (resourceVersion 1) until it arrives`,
			}},
		},
		"CANotDeliveredBeforeIssue": {
			in:   Input{ClientCert: &ClientCert{CA: &Secret{Name: "ca", Present: true}, Problem: "not issued"}},
			want: want{reason: ReasonClientCertificateNotReady, first: `the CA Secret "ca" has not reached the gateway cluster yet`},
		},
		"CALostAfterIssue": {
			in: Input{ClientCert: &ClientCert{CA: &Secret{Name: "ca", Problem: "the CA Secret \"ca\" is gone"}, Issued: true, Notice: "renewing"}},
			want: want{reason: ReasonNotProgrammed, first: "the Gateway", notices: []string{"renewing"},
				warnings: []string{`the CA Secret "ca" is gone; the client certificate issued before serves, but cert-manager cannot renew it`}},
		},
		"CallersNotFetched": {
			in:   Input{Callers: &Callers{Selector: []string{"team=a"}}},
			want: want{reason: ReasonNotProgrammed, first: "the Gateway", contains: "Crossplane has not fetched the caller Secrets that spec.auth.apiKey.secretSelector selects yet"},
		},
		"CallersNoneSelected": {
			in: Input{Callers: &Callers{Resolved: true, Selector: []string{"app=x", "team=a"}}},
			want: want{reason: ReasonNotProgrammed, first: "the Gateway",
				contains: `spec.auth.apiKey.secretSelector (app=x,team=a) selects no Secret in the namespace "` + in.ObjectNamespace + `"`},
		},
		"CallersOneUsableOneBroken": {
			in:   Input{Callers: &Callers{Resolved: true, Selected: []Caller{{Name: "a", InUse: true}, {Name: "b", Problem: "b is broken"}}}},
			want: want{reason: ReasonNotProgrammed, first: "the Gateway", contains: `the caller-auth SecurityPolicy "`, warnings: []string{"b is broken"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.in.Gateway, tc.in.Rule, tc.in.Now = g, rule, time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
			e, c, err := Judge(tc.in)
			if err != nil {
				t.Fatalf("Judge: %v", err)
			}
			got := want{reason: c.Reason, first: tc.want.first, contains: tc.want.contains, notices: e.Notices, warnings: e.AuthWarnings}
			if len(e.ClientCertWarnings) > 0 {
				got.warnings = append(got.warnings, e.ClientCertWarnings...)
			}
			if !strings.HasPrefix(c.Message, tc.want.first) {
				got.first = c.Message
			}
			if !strings.Contains(c.Message, tc.want.contains) {
				got.contains = c.Message
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("Judge: -want, +got:\n%s", diff)
			}
		})
	}
}
