package controlplane

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// TestEnvoyDescriptors: the suite's stand-in for Envoy's rate-limit filter
// turns the rate limits Envoy Gateway generates for a budget into the
// descriptors Envoy would send. The rate limits are shaped as in a real
// dump (scenario-budgets.json).
func TestEnvoyDescriptors(t *testing.T) {
	const route = "httproute/modelplane-gateway/qwen3-8b/rule/0/match/0/*"
	// The default rule of a per-model budget with a caller of its own
	// (ci-pipeline): a request check and a response charge.
	var rls []any
	harness.Must(t, json.Unmarshal([]byte(`[
	  {"actions": [
	    {"generic_key": {"descriptor_key": "`+route+`", "descriptor_value": "`+route+`"}},
	    {"request_headers": {"header_name": "x-modelplane-caller", "descriptor_key": "rule-0-match-0"}},
	    {"header_value_match": {"descriptor_key": "rule-0-match-1", "descriptor_value": "rule-0-match-1", "expect_match": false,
	      "headers": [{"name": "x-modelplane-caller", "string_match": {"exact": "ci-pipeline"}}]}}],
	   "hits_addend": {"number": "0"}},
	  {"actions": [
	    {"generic_key": {"descriptor_key": "`+route+`", "descriptor_value": "`+route+`"}},
	    {"request_headers": {"header_name": "x-modelplane-caller", "descriptor_key": "rule-0-match-0"}},
	    {"header_value_match": {"descriptor_key": "rule-0-match-1", "descriptor_value": "rule-0-match-1", "expect_match": false,
	      "headers": [{"name": "x-modelplane-caller", "string_match": {"exact": "ci-pipeline"}}]}}],
	   "apply_on_stream_done": true,
	   "hits_addend": {"format": "%DYNAMIC_METADATA(io.envoy.ai_gateway:llm_total_token)%"}},
	  {"actions": [
	    {"generic_key": {"descriptor_key": "`+route+`", "descriptor_value": "`+route+`"}},
	    {"header_value_match": {"descriptor_key": "rule-1-match-0", "descriptor_value": "rule-1-match-0",
	      "headers": [{"name": "x-modelplane-caller", "string_match": {"exact": "ci-pipeline"}}]}}],
	   "hits_addend": {"number": "0"}}
	]`), &rls))
	entry := func(k, v string) map[string]any { return map[string]any{"key": k, "value": v} }
	defaultRule := []any{entry(route, route), entry("rule-0-match-0", "alice"), entry("rule-0-match-1", "rule-0-match-1")}
	for name, tc := range map[string]struct {
		headers map[string]string
		tokens  map[string]uint64
		done    bool
		want    []map[string]any
		wantErr bool
	}{
		"ARequestIsOnlyChecked": {
			headers: map[string]string{"x-modelplane-caller": "alice"},
			want:    []map[string]any{{"entries": defaultRule, "hits_addend": "0"}},
		},
		"AResponseIsChargedItsTokens": {
			headers: map[string]string{"x-modelplane-caller": "alice"},
			tokens:  map[string]uint64{"llm_total_token": 60},
			done:    true,
			want:    []map[string]any{{"entries": defaultRule, "hits_addend": "60"}},
		},
		"ACallerWithItsOwnLimitIsLeftOutOfTheDefault": {
			headers: map[string]string{"x-modelplane-caller": "ci-pipeline"},
			want:    []map[string]any{{"entries": []any{entry(route, route), entry("rule-1-match-0", "rule-1-match-0")}, "hits_addend": "0"}},
		},
		"NoCallerNoDescriptor": {
			headers: map[string]string{},
		},
		"ATokenCountAIGatewayDoesNotWrite": {
			headers: map[string]string{"x-modelplane-caller": "alice"},
			tokens:  map[string]uint64{"llm_output_token": 60},
			done:    true,
			wantErr: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := envoyDescriptors(rls, tc.headers, tc.tokens, tc.done)
			if (err != nil) != tc.wantErr {
				t.Fatalf("envoyDescriptors(...): error %v, want error %t", err, tc.wantErr)
			}
			// Through JSON, as the descriptors are sent.
			b, err := json.Marshal(got)
			harness.Must(t, err)
			var gotJSON, wantJSON any
			harness.Must(t, json.Unmarshal(b, &gotJSON))
			b, err = json.Marshal(tc.want)
			harness.Must(t, err)
			harness.Must(t, json.Unmarshal(b, &wantJSON))
			if diff := cmp.Diff(wantJSON, gotJSON); diff != "" {
				t.Errorf("envoyDescriptors(...): -want, +got:\n%s", diff)
			}
		})
	}
}
