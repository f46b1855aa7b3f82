package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseFunctionCalls(t *testing.T) {
	line := func(ts, kind, name string) string {
		return ts + "\tDEBUG\tfn/fn.go:88\tComposed\t{\"tag\": \"83c2\", \"xr-kind\": \"" + kind + "\", \"xr-name\": \"" + name + "\", \"resources\": 13}"
	}
	from := time.Date(2026, 12, 3, 15, 37, 0, 0, time.UTC)
	to := from.Add(time.Minute)
	ts := func(s string) time.Time { return parseTime(t, s) }
	cases := map[string]struct {
		log     string
		want    map[string][]time.Time
		wantErr string
	}{
		"CallsInTheWindow": {
			log: strings.Join([]string{
				line("2026-12-03T15:36:59.000Z", "ModelRoute", "a"),
				line("2026-12-03T15:37:10.000Z", "ModelRoute", "a"),
				line("2026-12-03T15:37:10.006Z", "ModelRoute", "a"),
				line("2026-12-03T15:37:20.000Z", "InferenceGateway", "gw"),
				line("2026-12-03T15:37:30.000Z", "ModelRoute", "b"),
				line("2026-12-03T15:38:00.000Z", "ModelRoute", "a"),
			}, "\n"),
			want: map[string][]time.Time{
				"a": {ts("2026-12-03T15:37:10.000Z"), ts("2026-12-03T15:37:10.006Z")},
				"b": {ts("2026-12-03T15:37:30.000Z")},
			},
		},
		"NoCallInTheWindow": {
			log:  line("2026-12-03T15:30:00.000Z", "ModelRoute", "a"),
			want: map[string][]time.Time{},
		},
		"NoLineAtAll": {
			log:     line("2026-12-03T15:37:20.000Z", "InferenceGateway", "gw"),
			wantErr: "no \"Composed\" line for a ModelRoute in the whole log",
		},
		"MessageRenamed": {
			log:     strings.ReplaceAll(line("2026-12-03T15:37:10.000Z", "ModelRoute", "a"), "\tComposed\t", "\tComposed the desired state\t"),
			wantErr: "no \"Composed\" line",
		},
		"NameKeyRenamed": {
			log:     strings.ReplaceAll(line("2026-12-03T15:37:10.000Z", "ModelRoute", "a"), "xr-name", "composite"),
			wantErr: "no longer matches",
		},
		"TimeFormatChanged": {
			log:     strings.Replace(line("2026-12-03T15:37:10.000Z", "ModelRoute", "a"), "2026-12-03T15:37:10.000Z", "1764776230.0", 1),
			wantErr: "no longer matches",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseFunctionCalls(tc.log, "ModelRoute", from, to)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseFunctionCalls(...): error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			Must(t, err)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parseFunctionCalls(...): -want, +got:\n%s", diff)
			}
		})
	}
}

func TestParseFunctionVerdicts(t *testing.T) {
	line := func(ts, kind, name, verdict, gw string) string {
		return ts + "\tDEBUG\tfn/fn.go:93\tComposed\t{\"tag\": \"83c2\", \"xr-kind\": \"" + kind + "\", \"xr-name\": \"" + name +
			"\", \"resources\": 11, \"ttl\": \"1m0s\", \"RoutingReady\": \"" + verdict + "\", \"gateway\": \"" + gw + "\"}"
	}
	const (
		first   = "WaitingForGateway"
		gwFalse = "inference-gateway GatewayReady=False since 2026-12-04T12:44:25Z"
		gwTrue  = "inference-gateway GatewayReady=True since 2026-12-04T12:30:00Z"
	)
	from := time.Date(2026, 12, 4, 12, 44, 0, 0, time.UTC)
	to := from.Add(time.Minute)
	ts := func(s string) time.Time { return parseTime(t, s) }
	cases := map[string]struct {
		log     string
		want    map[string][]FnVerdict
		wantErr string
	}{
		"VerdictsInTheWindow": {
			log: strings.Join([]string{
				line("2026-12-04T12:43:59.000Z", "ModelRoute", "a", "true/RouteAccepted", gwTrue),
				line("2026-12-04T12:44:10.000Z", "ModelRoute", "a", "false/WaitingForGateway", first),
				line("2026-12-04T12:44:10.400Z", "ModelRoute", "a", "false/WaitingForGateway", gwFalse),
				line("2026-12-04T12:44:20.000Z", "ModelRoute", "a", "true/RouteAccepted", gwTrue),
				line("2026-12-04T12:45:00.000Z", "ModelRoute", "b", "true/RouteAccepted", gwTrue),
			}, "\n"),
			want: map[string][]FnVerdict{"a": {
				{At: ts("2026-12-04T12:44:10.000Z")},
				{At: ts("2026-12-04T12:44:10.400Z"), GatewayFalse: true},
				{At: ts("2026-12-04T12:44:20.000Z"), Ready: true},
			}},
		},
		"NoLineCarriesTheCondition": {
			log:     strings.ReplaceAll(line("2026-12-04T12:44:10.000Z", "ModelRoute", "a", "true/RouteAccepted", gwTrue), "RoutingReady", "Routable"),
			wantErr: "carries RoutingReady",
		},
		"GatewayEvidenceRenamed": {
			log:     line("2026-12-04T12:44:10.000Z", "ModelRoute", "a", "false/WaitingForGateway", "inference-gateway ready=false since 2026-12-04T12:44:25Z"),
			wantErr: "carries the gateway's verdict",
		},
		"StatusSpelledOtherwise": {
			log:     line("2026-12-04T12:44:10.000Z", "ModelRoute", "a", "True/RouteAccepted", gwTrue),
			wantErr: "no longer matches",
		},
		"NoComposedLine": {
			log:     line("2026-12-04T12:44:10.000Z", "InferenceGateway", "gw", "true/Serving", ""),
			wantErr: "no \"Composed\" line for a ModelRoute",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseFunctionVerdicts(tc.log, "ModelRoute", "RoutingReady", from, to)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseFunctionVerdicts(...): error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			Must(t, err)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(FnVerdict{})); diff != "" {
				t.Errorf("parseFunctionVerdicts(...): -want, +got:\n%s", diff)
			}
		})
	}
}

// parseTime parses an RFC 3339 time of a test's table, or fails the test.
func parseTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	Must(t, err)
	return v
}
