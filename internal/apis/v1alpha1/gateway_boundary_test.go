package v1alpha1_test

import (
	"encoding/json"
	"fmt"
	"maps"
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

// namespaces lists n namespace names.
func namespaces(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = fmt.Sprintf("ns-%d", i)
	}
	return out
}

// TestInferenceGatewayBounds feeds values just inside and just outside
// every bounded marker of the InferenceGateway to Validate and to the XRD.
func TestInferenceGatewayBounds(t *testing.T) {
	base := func() map[string]any { return map[string]any{"providerConfigName": "p"} }
	tls := func() map[string]any {
		return map[string]any{"certificateRefs": []any{map[string]any{"name": "llm-tls"}}}
	}
	refs := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = map[string]any{"name": "c" + string(rune('a'+i))}
		}
		return out
	}
	issuer := func(cc map[string]any) map[string]any {
		out := map[string]any{"issuerRef": map[string]any{"name": "ca"}}
		maps.Copy(out, cc)
		return out
	}
	rows := map[string]bound{
		"Base": {goOK: true, schemaOK: true},

		"ProviderConfigNameEmpty":   {set: map[string]any{"providerConfigName": ""}},
		"ProviderConfigNameMax":     {set: map[string]any{"providerConfigName": long(253)}, goOK: true, schemaOK: true},
		"ProviderConfigNameTooLong": {set: map[string]any{"providerConfigName": long(254)}},
		"ProviderConfigNameNotDNS":  {set: map[string]any{"providerConfigName": "GPU_Cluster"}},
		"ProviderConfigNameSpace":   {set: map[string]any{"providerConfigName": "gpu cluster"}},

		"ReplicasMin":      {set: map[string]any{"replicas": 0}, goOK: true, schemaOK: true},
		"ReplicasUnderMin": {set: map[string]any{"replicas": -1}},
		"ReplicasMax":      {set: map[string]any{"replicas": 100}, goOK: true, schemaOK: true},
		"ReplicasOverMax":  {set: map[string]any{"replicas": 101}},

		"ClassNameEmpty":   {set: map[string]any{"className": ""}, goOK: true, why: "Validate reads an empty className as unset (the Input's gatewayClassName); the schema's minLength refuses it"},
		"ClassNameMax":     {set: map[string]any{"className": long(253)}, goOK: true, schemaOK: true},
		"ClassNameTooLong": {set: map[string]any{"className": long(254)}},
		"ClassNameNotDNS":  {set: map[string]any{"className": "Envoy Class"}},

		"UnprefixedNamespaces":          {set: map[string]any{"modelNames.unprefixedNamespaces": []any{"ml-platform", "*"}}, goOK: true, schemaOK: true},
		"UnprefixedNamespacesNotDNS":    {set: map[string]any{"modelNames.unprefixedNamespaces": []any{"ML_Platform"}}},
		"UnprefixedNamespacesDuplicate": {set: map[string]any{"modelNames.unprefixedNamespaces": []any{"a", "a"}}},
		"UnprefixedNamespacesMax":       {set: map[string]any{"modelNames.unprefixedNamespaces": namespaces(v1alpha1.MaxUnprefixedNamespaces)}, goOK: true, schemaOK: true},
		"UnprefixedNamespacesOverMax":   {set: map[string]any{"modelNames.unprefixedNamespaces": namespaces(v1alpha1.MaxUnprefixedNamespaces + 1)}},

		"HostnameOK":        {set: map[string]any{"hostname": "llm.example.com"}, goOK: true, schemaOK: true},
		"HostnameMax":       {set: map[string]any{"hostname": long(63) + "." + long(63) + "." + long(63) + "." + long(61)}, goOK: true, schemaOK: true},
		"HostnameTooLong":   {set: map[string]any{"hostname": long(63) + "." + long(63) + "." + long(63) + "." + long(62)}},
		"HostnameUppercase": {set: map[string]any{"hostname": "LLM.example.com"}},
		"HostnameEmptyPart": {set: map[string]any{"hostname": "llm..example.com"}},

		"TLSWithHostname":     {set: map[string]any{"hostname": "llm.example.com", "tls": tls()}, goOK: true, schemaOK: true},
		"TLSWithoutHostname":  {set: map[string]any{"tls": tls()}},
		"TLSRefsEmpty":        {set: map[string]any{"hostname": "llm.example.com", "tls.certificateRefs": []any{}}},
		"TLSRefsMax":          {set: map[string]any{"hostname": "llm.example.com", "tls.certificateRefs": refs(8)}, goOK: true, schemaOK: true},
		"TLSRefsOverMax":      {set: map[string]any{"hostname": "llm.example.com", "tls.certificateRefs": refs(9)}},
		"TLSRefNameEmpty":     {set: map[string]any{"hostname": "llm.example.com", "tls.certificateRefs": []any{map[string]any{"name": ""}}}},
		"TLSRefNameNotDNS":    {set: map[string]any{"hostname": "llm.example.com", "tls.certificateRefs": []any{map[string]any{"name": "Bad_Name"}}}},
		"TLSRefNameDuplicate": {set: map[string]any{"hostname": "llm.example.com", "tls.certificateRefs": []any{map[string]any{"name": "a"}, map[string]any{"name": "a"}}}},

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
		"TriggerDuplicate": {set: map[string]any{"failover.retryOn.triggers": []any{"reset", "reset"}}},

		"StatusCodeMin":       {set: map[string]any{"failover.retryOn.httpStatusCodes": []any{100}}, goOK: true, schemaOK: true},
		"StatusCodeUnderMin":  {set: map[string]any{"failover.retryOn.httpStatusCodes": []any{99}}},
		"StatusCodeMax":       {set: map[string]any{"failover.retryOn.httpStatusCodes": []any{599}}, goOK: true, schemaOK: true},
		"StatusCodeOverMax":   {set: map[string]any{"failover.retryOn.httpStatusCodes": []any{600}}},
		"StatusCodesMax":      {set: map[string]any{"failover.retryOn.httpStatusCodes": seq(500, 16)}, goOK: true, schemaOK: true},
		"StatusCodesOverMax":  {set: map[string]any{"failover.retryOn.httpStatusCodes": seq(500, 17)}},
		"StatusCodeDuplicate": {set: map[string]any{"failover.retryOn.httpStatusCodes": []any{429, 429}}},

		"DrainMin":        {set: map[string]any{"envoy.drainTimeout": "1s"}, goOK: true, schemaOK: true},
		"DrainUnderMin":   {set: map[string]any{"envoy.drainTimeout": "999ms"}},
		"DrainMax":        {set: map[string]any{"envoy.drainTimeout": "1h"}, goOK: true, schemaOK: true},
		"DrainOverMax":    {set: map[string]any{"envoy.drainTimeout": "3601s"}},
		"DrainGoOnly":     {set: map[string]any{"envoy.drainTimeout": "1.5m"}},
		"DrainNotPattern": {set: map[string]any{"envoy.drainTimeout": "5 minutes"}},

		"ServiceAccountName":          {set: map[string]any{"envoy.serviceAccountName": "bedrock-invoker"}, goOK: true, schemaOK: true},
		"ServiceAccountNameMax":       {set: map[string]any{"envoy.serviceAccountName": long(253)}, goOK: true, schemaOK: true},
		"ServiceAccountNameTooLong":   {set: map[string]any{"envoy.serviceAccountName": long(254)}},
		"ServiceAccountNameEmpty":     {set: map[string]any{"envoy.serviceAccountName": ""}},
		"ServiceAccountNameNotDNS":    {set: map[string]any{"envoy.serviceAccountName": "Bedrock_Invoker"}},
		"SAAnnotationsIRSA":           {set: map[string]any{"envoy.serviceAccountAnnotations": map[string]any{"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/invoke"}}, goOK: true, schemaOK: true},
		"SAAnnotationsMax":            {set: map[string]any{"envoy.serviceAccountAnnotations": annotations(v1alpha1.MaxServiceAccountAnnotations)}, goOK: true, schemaOK: true},
		"SAAnnotationsOverMax":        {set: map[string]any{"envoy.serviceAccountAnnotations": annotations(v1alpha1.MaxServiceAccountAnnotations + 1)}},
		"SAAnnotationKeyNotQualified": {set: map[string]any{"envoy.serviceAccountAnnotations": map[string]any{"role arn": "x"}}, schemaOK: true, why: goAnnotations},
		"SAAnnotationValueTooLong":    {set: map[string]any{"envoy.serviceAccountAnnotations": map[string]any{"a": long(4097)}}, schemaOK: true, why: goAnnotations},

		"SpreadKnown":   {set: map[string]any{"envoy.spread.whenUnsatisfiable": "DoNotSchedule"}, goOK: true, schemaOK: true},
		"SpreadUnknown": {set: map[string]any{"envoy.spread.whenUnsatisfiable": "Never"}},

		"AuthMethodKnown":     {set: map[string]any{"auth.method": v1alpha1.AuthMethodAPIKey, "auth.apiKey.secretSelector.matchLabels": labels(1)}, goOK: true, schemaOK: true},
		"AuthMethodUnknown":   {set: map[string]any{"auth.method": "Basic", "auth.apiKey.secretSelector.matchLabels": labels(1)}},
		"AuthWithoutSelector": {set: map[string]any{"auth": map[string]any{}}},
		"LabelsEmpty":         {set: map[string]any{"auth.apiKey.secretSelector.matchLabels": labels(0)}},
		"LabelsMax":           {set: map[string]any{"auth.apiKey.secretSelector.matchLabels": labels(v1alpha1.MaxSelectorLabels)}, goOK: true, schemaOK: true},
		"LabelsOverMax":       {set: map[string]any{"auth.apiKey.secretSelector.matchLabels": labels(v1alpha1.MaxSelectorLabels + 1)}},
		"LabelKeyMalformed":   {set: map[string]any{"auth.apiKey.secretSelector.matchLabels": map[string]any{"bad key": "v"}}, schemaOK: true, why: goRange},

		"BudgetWithAuth":        {set: budgets(budget(nil)), goOK: true, schemaOK: true},
		"BudgetWithoutAuth":     {set: map[string]any{"budgets": []any{budget(nil)}}},
		"BudgetsEmptyNoAuth":    {set: map[string]any{"budgets": []any{}}, goOK: true, schemaOK: true},
		"BudgetsMax":            {set: budgets(repeat(budget(nil), v1alpha1.MaxBudgets)...), goOK: true, schemaOK: true},
		"BudgetsOverMax":        {set: budgets(repeat(budget(nil), v1alpha1.MaxBudgets+1)...)},
		"BudgetTokensUnknown":   {set: budgets(budget(map[string]any{"tokens": "Cached"}))},
		"BudgetTokensMissing":   {set: budgets(budget(map[string]any{"tokens": nil}))},
		"BudgetLimitMin":        {set: budgets(budget(map[string]any{"limit": 1})), goOK: true, schemaOK: true},
		"BudgetLimitUnderMin":   {set: budgets(budget(map[string]any{"limit": 0}))},
		"BudgetLimitMax":        {set: budgets(budget(map[string]any{"limit": v1alpha1.MaxBudgetLimit})), goOK: true, schemaOK: true},
		"BudgetLimitOverMax":    {set: budgets(budget(map[string]any{"limit": v1alpha1.MaxBudgetLimit + 1}))},
		"BudgetPerMonth":        {set: budgets(budget(map[string]any{"per": v1alpha1.BudgetPerMonth})), goOK: true, schemaOK: true},
		"BudgetPerSecond":       {set: budgets(budget(map[string]any{"per": "Second"}))},
		"BudgetPerMissing":      {set: budgets(budget(map[string]any{"per": nil}))},
		"BudgetScopeAllModels":  {set: budgets(budget(map[string]any{"scope": v1alpha1.BudgetScopeAllModels})), goOK: true, schemaOK: true},
		"BudgetScopeUnknown":    {set: budgets(budget(map[string]any{"scope": "PerRoute"}))},
		"BudgetCallersMax":      {set: budgets(budget(map[string]any{"callers": callers(v1alpha1.MaxBudgetCallers)})), goOK: true, schemaOK: true},
		"BudgetCallersOverMax":  {set: budgets(budget(map[string]any{"callers": callers(v1alpha1.MaxBudgetCallers + 1)}))},
		"BudgetCallerDuplicate": {set: budgets(budget(map[string]any{"callers": []any{map[string]any{"name": "a", "limit": 1}, map[string]any{"name": "a", "limit": 2}}}))},
		"BudgetCallerNameBad":   {set: budgets(budget(map[string]any{"callers": []any{map[string]any{"name": "team a", "limit": 1}}}))},
		"BudgetCallerNameEmpty": {set: budgets(budget(map[string]any{"callers": []any{map[string]any{"name": "", "limit": 1}}}))},
		"BudgetCallerLimitZero": {set: budgets(budget(map[string]any{"callers": []any{map[string]any{"name": "a", "limit": 0}}}))},
		"BudgetCallerLimitMax":  {set: budgets(budget(map[string]any{"callers": []any{map[string]any{"name": "a", "limit": v1alpha1.MaxBudgetLimit}}})), goOK: true, schemaOK: true},
		"BudgetCallerLimitOver": {set: budgets(budget(map[string]any{"callers": []any{map[string]any{"name": "a", "limit": v1alpha1.MaxBudgetLimit + 1}}}))},

		"ClientCertRequired":      {set: map[string]any{"backendTLS": map[string]any{}}},
		"ClientCertIssuer":        {set: map[string]any{"backendTLS.clientCertificate": issuer(nil)}, goOK: true, schemaOK: true},
		"ClientCertBoth":          {set: map[string]any{"backendTLS.clientCertificate": issuer(map[string]any{"caSecretRef": map[string]any{"name": "ca"}})}},
		"ClientCertNeither":       {set: map[string]any{"backendTLS.clientCertificate": map[string]any{"duration": "2h"}}},
		"IssuerNameEmpty":         {set: map[string]any{"backendTLS.clientCertificate.issuerRef.name": ""}},
		"IssuerNameMax":           {set: map[string]any{"backendTLS.clientCertificate.issuerRef.name": long(253)}, goOK: true, schemaOK: true},
		"IssuerNameTooLong":       {set: map[string]any{"backendTLS.clientCertificate.issuerRef.name": long(254)}},
		"IssuerNameNotDNS":        {set: map[string]any{"backendTLS.clientCertificate.issuerRef.name": "Corp CA"}},
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
		"CASecretRefNameNotDNS":   {set: map[string]any{"backendTLS.clientCertificate": map[string]any{"caSecretRef": map[string]any{"name": "CA_Secret"}}}},
	}
	checkBounds(t, "gateway", v1alpha1.KindInferenceGateway, base, func(b []byte) error {
		s := &v1alpha1.InferenceGatewaySpec{}
		if err := json.Unmarshal(b, s); err != nil {
			return err
		}
		return s.Validate()
	}, rows)
}

// goAnnotations is why the schema takes annotations Validate refuses.
const goAnnotations = "Validate checks annotation keys and values as Kubernetes and Gateway API do; the schema bounds only their count, since a CEL rule over a map's keys of unbounded length would exceed the API server's cost budget"

// annotations are n distinct annotations.
func annotations(n int) map[string]any {
	out := make(map[string]any, n)
	for i := range n {
		out[fmt.Sprintf("example.com/a%d", i)] = "v"
	}
	return out
}

// triggers are every trigger Envoy Gateway knows.
func triggers() []any {
	out := make([]any, len(v1alpha1.RetryTriggers))
	for i, t := range v1alpha1.RetryTriggers {
		out[i] = string(t)
	}
	return out
}

// budget is a valid budget, with the given fields set or, with nil,
// deleted.
func budget(set map[string]any) map[string]any {
	b := map[string]any{"tokens": v1alpha1.BudgetTokensTotal, "limit": 100000, "per": v1alpha1.BudgetPerDay}
	for k, v := range set {
		if v == nil {
			delete(b, k)
			continue
		}
		b[k] = v
	}
	return b
}

// budgets sets spec.budgets to bs, with the auth budgets need.
func budgets(bs ...map[string]any) map[string]any {
	l := make([]any, len(bs))
	for i, b := range bs {
		l[i] = b
	}
	return map[string]any{"auth.apiKey.secretSelector.matchLabels": labels(1), "budgets": l}
}

// repeat is n copies of b.
func repeat(b map[string]any, n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = maps.Clone(b)
	}
	return out
}

// callers are n distinct caller limits.
func callers(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"name": fmt.Sprintf("caller-%d", i), "limit": 1000}
	}
	return out
}
