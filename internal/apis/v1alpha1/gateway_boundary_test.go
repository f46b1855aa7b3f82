package v1alpha1_test

import (
	"encoding/json"
	"testing"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
)

// Reasons shared by rows where Validate and the schema differ.
const (
	// goRange: the schema cannot compare a value with another or parse it.
	goRange = "deliberate: Validate checks what the schema cannot say (Go's own parse, a range within the pattern, or one field against another)"
	// goLength: Validate leaves name lengths to the API server.
	goLength = "Validate leaves this length to the API server; crossplane render lets it through (reported, behaviour kept)"
)

// TestInferenceGatewayBounds feeds values just inside and just outside
// every bounded marker of the InferenceGateway to Validate and to the XRD.
func TestInferenceGatewayBounds(t *testing.T) {
	base := func() map[string]any { return map[string]any{"providerConfigName": "p"} }
	tls := map[string]any{"certificateRefs": []any{map[string]any{"name": "llm-tls"}}}
	refs := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = map[string]any{"name": "c" + string(rune('a'+i))}
		}
		return out
	}
	issuer := func(cc map[string]any) map[string]any {
		out := map[string]any{"issuerRef": map[string]any{"name": "ca"}}
		for k, v := range cc {
			out[k] = v
		}
		return out
	}
	rows := map[string]bound{
		"Base": {goOK: true, schemaOK: true},

		"ProviderConfigNameEmpty":   {set: map[string]any{"providerConfigName": ""}},
		"ProviderConfigNameMax":     {set: map[string]any{"providerConfigName": long(253)}, goOK: true, schemaOK: true},
		"ProviderConfigNameTooLong": {set: map[string]any{"providerConfigName": long(254)}, goOK: true, why: goLength},

		"ReplicasMin":      {set: map[string]any{"replicas": 0}, goOK: true, schemaOK: true},
		"ReplicasUnderMin": {set: map[string]any{"replicas": -1}},
		"ReplicasMax":      {set: map[string]any{"replicas": 100}, goOK: true, schemaOK: true},
		"ReplicasOverMax":  {set: map[string]any{"replicas": 101}, goOK: true, why: "DISAGREEMENT: Validate checks only replicas >= 0, the schema also <= 100 (reported, behaviour kept)"},

		"ClassNameEmpty":   {set: map[string]any{"className": ""}, goOK: true, why: "Validate reads an empty className as unset (the Input's gatewayClassName); the schema's minLength refuses it"},
		"ClassNameMax":     {set: map[string]any{"className": long(253)}, goOK: true, schemaOK: true},
		"ClassNameTooLong": {set: map[string]any{"className": long(254)}, goOK: true, why: goLength},

		"HostnameOK":        {set: map[string]any{"hostname": "llm.example.com"}, goOK: true, schemaOK: true},
		"HostnameMax":       {set: map[string]any{"hostname": long(63) + "." + long(63) + "." + long(63) + "." + long(61)}, goOK: true, schemaOK: true},
		"HostnameTooLong":   {set: map[string]any{"hostname": long(63) + "." + long(63) + "." + long(63) + "." + long(62)}},
		"HostnameUppercase": {set: map[string]any{"hostname": "LLM.example.com"}},
		"HostnameEmptyPart": {set: map[string]any{"hostname": "llm..example.com"}},

		"TLSWithHostname":     {set: map[string]any{"hostname": "llm.example.com", "tls": tls}, goOK: true, schemaOK: true},
		"TLSWithoutHostname":  {set: map[string]any{"tls": tls}},
		"TLSRefsEmpty":        {set: map[string]any{"hostname": "llm.example.com", "tls.certificateRefs": []any{}}},
		"TLSRefsMax":          {set: map[string]any{"hostname": "llm.example.com", "tls.certificateRefs": refs(8)}, goOK: true, schemaOK: true},
		"TLSRefsOverMax":      {set: map[string]any{"hostname": "llm.example.com", "tls.certificateRefs": refs(9)}, goOK: true, why: "DISAGREEMENT: Validate does not count certificateRefs (reported, behaviour kept)"},
		"TLSRefNameEmpty":     {set: map[string]any{"hostname": "llm.example.com", "tls.certificateRefs": []any{map[string]any{"name": ""}}}},
		"TLSRefNameNotDNS":    {set: map[string]any{"hostname": "llm.example.com", "tls.certificateRefs": []any{map[string]any{"name": "Bad_Name"}}}, goOK: true, why: "DISAGREEMENT: Validate checks only that the name is set, not that it is a Secret name (reported, behaviour kept)"},
		"TLSRefNameDuplicate": {set: map[string]any{"hostname": "llm.example.com", "tls.certificateRefs": []any{map[string]any{"name": "a"}, map[string]any{"name": "a"}}}, goOK: true, why: "Validate does not look for duplicates; the schema's listType=map refuses them"},

		"BufferLimitMin":         {set: map[string]any{"connection.bufferLimit": "32Ki"}, goOK: true, schemaOK: true},
		"BufferLimitUnderMin":    {set: map[string]any{"connection.bufferLimit": "31Ki"}, schemaOK: true, why: goRange},
		"BufferLimitMax":         {set: map[string]any{"connection.bufferLimit": "4095Mi"}, goOK: true, schemaOK: true},
		"BufferLimitOverMax":     {set: map[string]any{"connection.bufferLimit": "4Gi"}, schemaOK: true, why: goRange},
		"BufferLimitZero":        {set: map[string]any{"connection.bufferLimit": "0"}},
		"BufferLimitDecimalUnit": {set: map[string]any{"connection.bufferLimit": "50M"}, goOK: true, why: "Validate takes any quantity in range; the schema's pattern only binary suffixes"},

		"NumRetriesMin":      {set: map[string]any{"failover.numRetries": 0}, goOK: true, schemaOK: true},
		"NumRetriesUnderMin": {set: map[string]any{"failover.numRetries": -1}},
		"NumRetriesMax":      {set: map[string]any{"failover.numRetries": 10}, goOK: true, schemaOK: true},
		"NumRetriesOverMax":  {set: map[string]any{"failover.numRetries": 11}},

		"PanicThresholdMin":      {set: map[string]any{"failover.panicThreshold": 0}, goOK: true, schemaOK: true},
		"PanicThresholdUnderMin": {set: map[string]any{"failover.panicThreshold": -1}},
		"PanicThresholdMax":      {set: map[string]any{"failover.panicThreshold": 100}, goOK: true, schemaOK: true},
		"PanicThresholdOverMax":  {set: map[string]any{"failover.panicThreshold": 101}},

		"TriggerKnown":     {set: map[string]any{"failover.retryOn.triggers": []any{"reset", "5xx"}}, goOK: true, schemaOK: true},
		"TriggerUnknown":   {set: map[string]any{"failover.retryOn.triggers": []any{"bogus"}}},
		"TriggersAll":      {set: map[string]any{"failover.retryOn.triggers": triggers()}, goOK: true, schemaOK: true},
		"TriggerDuplicate": {set: map[string]any{"failover.retryOn.triggers": []any{"reset", "reset"}}, goOK: true, why: "Validate does not look for duplicates; the schema's listType=set refuses them"},

		"StatusCodeMin":      {set: map[string]any{"failover.retryOn.httpStatusCodes": []any{100}}, goOK: true, schemaOK: true},
		"StatusCodeUnderMin": {set: map[string]any{"failover.retryOn.httpStatusCodes": []any{99}}},
		"StatusCodeMax":      {set: map[string]any{"failover.retryOn.httpStatusCodes": []any{599}}, goOK: true, schemaOK: true},
		"StatusCodeOverMax":  {set: map[string]any{"failover.retryOn.httpStatusCodes": []any{600}}},
		"StatusCodesMax":     {set: map[string]any{"failover.retryOn.httpStatusCodes": seq(500, 16)}, goOK: true, schemaOK: true},
		"StatusCodesOverMax": {set: map[string]any{"failover.retryOn.httpStatusCodes": seq(500, 17)}, goOK: true, why: "DISAGREEMENT: Validate does not count httpStatusCodes (reported, behaviour kept)"},

		"DrainMin":        {set: map[string]any{"envoy.drainTimeout": "1s"}, goOK: true, schemaOK: true},
		"DrainUnderMin":   {set: map[string]any{"envoy.drainTimeout": "999ms"}},
		"DrainMax":        {set: map[string]any{"envoy.drainTimeout": "1h"}, goOK: true, schemaOK: true},
		"DrainOverMax":    {set: map[string]any{"envoy.drainTimeout": "3601s"}},
		"DrainGoOnly":     {set: map[string]any{"envoy.drainTimeout": "1.5m"}},
		"DrainNotPattern": {set: map[string]any{"envoy.drainTimeout": "5 minutes"}},

		"SpreadKnown":   {set: map[string]any{"envoy.spread.whenUnsatisfiable": "DoNotSchedule"}, goOK: true, schemaOK: true},
		"SpreadUnknown": {set: map[string]any{"envoy.spread.whenUnsatisfiable": "Never"}},

		"AuthMethodKnown":     {set: map[string]any{"auth.method": v1alpha1.AuthMethodAPIKey, "auth.apiKey.secretSelector.matchLabels": labels(1)}, goOK: true, schemaOK: true},
		"AuthMethodUnknown":   {set: map[string]any{"auth.method": "Basic", "auth.apiKey.secretSelector.matchLabels": labels(1)}},
		"AuthWithoutSelector": {set: map[string]any{"auth": map[string]any{}}},
		"LabelsEmpty":         {set: map[string]any{"auth.apiKey.secretSelector.matchLabels": labels(0)}},
		"LabelsMax":           {set: map[string]any{"auth.apiKey.secretSelector.matchLabels": labels(v1alpha1.MaxSelectorLabels)}, goOK: true, schemaOK: true},
		"LabelsOverMax":       {set: map[string]any{"auth.apiKey.secretSelector.matchLabels": labels(v1alpha1.MaxSelectorLabels + 1)}},
		"LabelKeyMalformed":   {set: map[string]any{"auth.apiKey.secretSelector.matchLabels": map[string]any{"bad key": "v"}}, schemaOK: true, why: goRange},

		"ClientCertRequired":      {set: map[string]any{"backendTLS": map[string]any{}}},
		"ClientCertIssuer":        {set: map[string]any{"backendTLS.clientCertificate": issuer(nil)}, goOK: true, schemaOK: true},
		"ClientCertBoth":          {set: map[string]any{"backendTLS.clientCertificate": issuer(map[string]any{"caSecretRef": map[string]any{"name": "ca"}})}},
		"ClientCertNeither":       {set: map[string]any{"backendTLS.clientCertificate": map[string]any{"duration": "2h"}}},
		"IssuerNameEmpty":         {set: map[string]any{"backendTLS.clientCertificate.issuerRef.name": ""}},
		"IssuerNameMax":           {set: map[string]any{"backendTLS.clientCertificate.issuerRef.name": long(253)}, goOK: true, schemaOK: true},
		"IssuerNameTooLong":       {set: map[string]any{"backendTLS.clientCertificate.issuerRef.name": long(254)}, goOK: true, why: goLength},
		"IssuerKindCluster":       {set: map[string]any{"backendTLS.clientCertificate": issuer(nil), "backendTLS.clientCertificate.issuerRef.kind": v1alpha1.KindClusterIssuer}, goOK: true, schemaOK: true},
		"IssuerKindUnknown":       {set: map[string]any{"backendTLS.clientCertificate": issuer(nil), "backendTLS.clientCertificate.issuerRef.kind": "Vault"}},
		"DurationMin":             {set: map[string]any{"backendTLS.clientCertificate": issuer(map[string]any{"duration": "1h", "renewBefore": "5m"})}, goOK: true, schemaOK: true},
		"DurationUnderMin":        {set: map[string]any{"backendTLS.clientCertificate": issuer(map[string]any{"duration": "59m", "renewBefore": "5m"})}, schemaOK: true, why: goRange},
		"DurationNotPattern":      {set: map[string]any{"backendTLS.clientCertificate": issuer(map[string]any{"duration": "90d"})}},
		"RenewBeforeUnderMin":     {set: map[string]any{"backendTLS.clientCertificate": issuer(map[string]any{"renewBefore": "4m"})}, schemaOK: true, why: goRange},
		"RenewBeforeNotLess":      {set: map[string]any{"backendTLS.clientCertificate": issuer(map[string]any{"duration": "2h", "renewBefore": "2h"})}, schemaOK: true, why: goRange},
		"RenewBeforeTooLong":      {set: map[string]any{"backendTLS.clientCertificate": issuer(map[string]any{"renewBefore": "1h" + long(31)})}},
		"CASecretRefNameNotEmpty": {set: map[string]any{"backendTLS.clientCertificate": map[string]any{"caSecretRef": map[string]any{"name": "ca"}}}, goOK: true, schemaOK: true},
		"CASecretRefNameEmpty":    {set: map[string]any{"backendTLS.clientCertificate": map[string]any{"caSecretRef": map[string]any{"name": ""}}}},
	}
	checkBounds(t, "gateway", v1alpha1.KindInferenceGateway, base, func(b []byte) error {
		s := &v1alpha1.InferenceGatewaySpec{}
		if err := json.Unmarshal(b, s); err != nil {
			return err
		}
		return s.Validate()
	}, rows)
}

// triggers are every trigger Envoy Gateway knows.
func triggers() []any {
	out := make([]any, len(v1alpha1.RetryTriggers))
	for i, t := range v1alpha1.RetryTriggers {
		out[i] = string(t)
	}
	return out
}
