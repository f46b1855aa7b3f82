package v1alpha1_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
)

// TestModelRouteBounds feeds values just inside and just outside every
// bounded marker of the ModelRoute to Validate and to the XRD.
func TestModelRouteBounds(t *testing.T) {
	backend := func(name string) map[string]any {
		return map[string]any{"name": name, "endpoint": map[string]any{"hostname": "api.openai.com"}, "schema": map[string]any{"name": "OpenAI"}}
	}
	backends := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = backend(fmt.Sprintf("b%d", i))
		}
		return out
	}
	base := func() map[string]any { return map[string]any{"gatewayName": "g", "backends": backends(1)} }
	key := func() map[string]any {
		return map[string]any{"secretRef": map[string]any{"name": "k", "key": "apiKey"}}
	}
	rows := map[string]bound{
		"Base": {goOK: true, schemaOK: true},

		"GatewayNameEmpty":   {set: map[string]any{"gatewayName": ""}},
		"GatewayNameMax":     {set: map[string]any{"gatewayName": long(253)}, goOK: true, schemaOK: true},
		"GatewayNameTooLong": {set: map[string]any{"gatewayName": long(254)}},
		"GatewayNameNotDNS":  {set: map[string]any{"gatewayName": "Gateway 1"}},

		"ModelEmpty":   {set: map[string]any{"model": ""}, goOK: true, why: "Validate reads an empty model as unset (<namespace>/<name>); the schema's minLength refuses it"},
		"ModelMax":     {set: map[string]any{"model": long(4096)}, goOK: true, schemaOK: true},
		"ModelTooLong": {set: map[string]any{"model": long(4097)}},
		"ModelOtherNS": {set: map[string]any{"model": "other-team/qwen"}, goOK: true, schemaOK: true},
		"ModelSpaces":  {set: map[string]any{"model": "Qwen/Qwen3 8B Instruct"}, goOK: true, schemaOK: true},
		"ModelCRLF":    {set: map[string]any{"model": "ml-team/qwen\r\nx-ai-eg-model: gpt-4o"}},
		"ModelLF":      {set: map[string]any{"model": "qwen\n"}},
		"ModelTab":     {set: map[string]any{"model": "qwen\tx"}},
		"ModelDEL":     {set: map[string]any{"model": "qwen\u007f"}},
		"ModelLeading": {set: map[string]any{"model": " qwen"}},
		"ModelTrails":  {set: map[string]any{"model": "qwen "}},
		"ModelUnicode": {set: map[string]any{"model": "qwén"}},

		"BackendsEmpty":     {set: map[string]any{"backends": []any{}}},
		"BackendsMax":       {set: map[string]any{"backends": backends(v1alpha1.MaxBackends)}, goOK: true, schemaOK: true},
		"BackendsOverMax":   {set: map[string]any{"backends": backends(v1alpha1.MaxBackends + 1)}},
		"BackendsDuplicate": {set: map[string]any{"backends": []any{backend("a"), backend("a")}}},

		"NameEmpty":   {set: map[string]any{"backends[0].name": ""}},
		"NameMax":     {set: map[string]any{"backends[0].name": long(63)}, goOK: true, schemaOK: true},
		"NameTooLong": {set: map[string]any{"backends[0].name": long(64)}},
		"NameNotDNS":  {set: map[string]any{"backends[0].name": "Bad"}},

		"HostnameMax":     {set: map[string]any{"backends[0].endpoint.hostname": long(63) + "." + long(63) + "." + long(63) + "." + long(61)}, goOK: true, schemaOK: true},
		"HostnameTooLong": {set: map[string]any{"backends[0].endpoint.hostname": long(63) + "." + long(63) + "." + long(63) + "." + long(62)}},
		"HostnameNoDot":   {set: map[string]any{"backends[0].endpoint.hostname": "localhost"}},
		"HostnameIPv4":    {set: map[string]any{"backends[0].endpoint.hostname": "10.0.0.1"}},
		"HostnameIPv6":    {set: map[string]any{"backends[0].endpoint.hostname": "::1"}},

		"PortMin":      {set: map[string]any{"backends[0].endpoint.port": 1}, goOK: true, schemaOK: true},
		"PortUnderMin": {set: map[string]any{"backends[0].endpoint.port": 0}},
		"PortMax":      {set: map[string]any{"backends[0].endpoint.port": 65535}, goOK: true, schemaOK: true},
		"PortOverMax":  {set: map[string]any{"backends[0].endpoint.port": 65536}},

		"TLSConfigWithTLS":    {set: map[string]any{"backends[0].endpoint.tls": true, "backends[0].endpoint.tlsConfig.clientCertificate": true}, goOK: true, schemaOK: true},
		"TLSConfigWithoutTLS": {set: map[string]any{"backends[0].endpoint.tls": false, "backends[0].endpoint.tlsConfig.clientCertificate": true}},
		"CAKindSecret":        {set: map[string]any{"backends[0].endpoint.tlsConfig.caRef": map[string]any{"kind": v1alpha1.CAKindSecret, "name": "ca"}}, goOK: true, schemaOK: true},
		"CAKindUnknown":       {set: map[string]any{"backends[0].endpoint.tlsConfig.caRef": map[string]any{"kind": "Vault", "name": "ca"}}},
		"CANameEmpty":         {set: map[string]any{"backends[0].endpoint.tlsConfig.caRef": map[string]any{"name": ""}}},
		"CANameNotDNS":        {set: map[string]any{"backends[0].endpoint.tlsConfig.caRef": map[string]any{"name": "Bad_Name"}}},
		"CANameTooLong":       {set: map[string]any{"backends[0].endpoint.tlsConfig.caRef": map[string]any{"name": long(254)}}},

		"SchemaKnown":          {set: map[string]any{"backends[0].schema.name": "Cohere"}, goOK: true, schemaOK: true},
		"SchemaUnknown":        {set: map[string]any{"backends[0].schema.name": "Bogus"}},
		"PrefixMax":            {set: map[string]any{"backends[0].schema.prefix": "/" + long(1023)}, goOK: true, schemaOK: true},
		"PrefixTooLong":        {set: map[string]any{"backends[0].schema.prefix": "/" + long(1024)}, goOK: true, why: goLength},
		"PrefixNoSlash":        {set: map[string]any{"backends[0].schema.prefix": "v1"}, goOK: true, schemaOK: true},
		"PrefixEmpty":          {set: map[string]any{"backends[0].schema.prefix": ""}, goOK: true, schemaOK: true},
		"PrefixPath":           {set: map[string]any{"backends[0].schema.prefix": "/api/v1"}, goOK: true, schemaOK: true},
		"PrefixURL":            {set: map[string]any{"backends[0].schema.prefix": "https://api.example.com/v1"}},
		"PrefixCredentials":    {set: map[string]any{"backends[0].schema.prefix": "https://user:secret@api.example.com/v1"}},
		"PrefixNetworkPath":    {set: map[string]any{"backends[0].schema.prefix": "//api.example.com/v1"}},
		"PrefixAt":             {set: map[string]any{"backends[0].schema.prefix": "/user@host/v1"}},
		"PrefixCRLF":           {set: map[string]any{"backends[0].schema.prefix": "/v1\r\nx-injected: 1"}},
		"PrefixQuery":          {set: map[string]any{"backends[0].schema.prefix": "/v1?key=x"}},
		"PrefixFragment":       {set: map[string]any{"backends[0].schema.prefix": "/v1#x"}},
		"PrefixSpace":          {set: map[string]any{"backends[0].schema.prefix": "/v 1"}},
		"VersionMax":           {set: map[string]any{"backends[0].schema": map[string]any{"name": "AzureOpenAI", "version": long(64)}}, goOK: true, schemaOK: true},
		"VersionTooLong":       {set: map[string]any{"backends[0].schema": map[string]any{"name": "AzureOpenAI", "version": long(65)}}, goOK: true, why: goLength},
		"VersionIgnoredSchema": {set: map[string]any{"backends[0].schema.version": "v1"}, goOK: true, why: "Validate lets through a version AI Gateway ignores; the schema's rule refuses it so that nobody relies on it"},

		"PriorityMin":      {set: map[string]any{"backends[0].priority": 0}, goOK: true, schemaOK: true},
		"PriorityUnderMin": {set: map[string]any{"backends[0].priority": -1}},
		"PriorityMax":      {set: map[string]any{"backends[0].priority": v1alpha1.MaxPriority}, goOK: true, schemaOK: true},
		"PriorityOverMax":  {set: map[string]any{"backends[0].priority": v1alpha1.MaxPriority + 1}},

		"WeightMin":      {set: map[string]any{"backends[0].weight": 1}, goOK: true, schemaOK: true},
		"WeightUnderMin": {set: map[string]any{"backends[0].weight": 0}},
		"WeightMax":      {set: map[string]any{"backends[0].weight": v1alpha1.MaxWeight}, goOK: true, schemaOK: true},
		"WeightOverMax":  {set: map[string]any{"backends[0].weight": v1alpha1.MaxWeight + 1}},

		"OverrideMax":     {set: map[string]any{"backends[0].modelNameOverride": long(4096)}, goOK: true, schemaOK: true},
		"OverrideTooLong": {set: map[string]any{"backends[0].modelNameOverride": long(4097)}, goOK: true, why: goLength},

		"APIKeyOnOpenAI":      {set: map[string]any{"backends[0].apiKey": key()}, goOK: true, schemaOK: true},
		"APIKeyOnBedrock":     {set: map[string]any{"backends[0].apiKey": key(), "backends[0].schema.name": "AWSBedrock"}},
		"KeySecretNameEmpty":  {set: map[string]any{"backends[0].apiKey": key(), "backends[0].apiKey.secretRef.name": ""}},
		"KeySecretNameNotDNS": {set: map[string]any{"backends[0].apiKey": key(), "backends[0].apiKey.secretRef.name": "Bad_Name"}},
		"KeyKeyMax":           {set: map[string]any{"backends[0].apiKey": key(), "backends[0].apiKey.secretRef.key": long(253)}, goOK: true, schemaOK: true},
		"KeyKeyTooLong":       {set: map[string]any{"backends[0].apiKey": key(), "backends[0].apiKey.secretRef.key": long(254)}},
		"KeyKeySlash":         {set: map[string]any{"backends[0].apiKey": key(), "backends[0].apiKey.secretRef.key": "a/b"}},
		"KeyKeyDot":           {set: map[string]any{"backends[0].apiKey": key(), "backends[0].apiKey.secretRef.key": "."}, schemaOK: true, why: goRange},

		"RequestTimeoutOK":         {set: map[string]any{"timeouts.request": "1h30m"}, goOK: true, schemaOK: true},
		"RequestTimeoutNotPattern": {set: map[string]any{"timeouts.request": "10 minutes"}},
		"RequestTimeoutGoOnly":     {set: map[string]any{"timeouts.request": "1.5m"}},

		"AccessOne":              {set: map[string]any{"access.callers": []any{"ci-pipeline"}}, goOK: true, schemaOK: true},
		"AccessNoCallers":        {set: map[string]any{"access": map[string]any{}}},
		"AccessCallersEmpty":     {set: map[string]any{"access.callers": []any{}}},
		"AccessCallersMax":       {set: map[string]any{"access.callers": clientIDs(v1alpha1.MaxAccessCallers)}, goOK: true, schemaOK: true},
		"AccessCallersOverMax":   {set: map[string]any{"access.callers": clientIDs(v1alpha1.MaxAccessCallers + 1)}},
		"AccessCallerDuplicate":  {set: map[string]any{"access.callers": []any{"a", "b", "a"}}},
		"AccessCallerEmpty":      {set: map[string]any{"access.callers": []any{""}}},
		"AccessCallerSpace":      {set: map[string]any{"access.callers": []any{"team a"}}},
		"AccessCallerSlash":      {set: map[string]any{"access.callers": []any{"team/a"}}},
		"AccessCallerPunctuated": {set: map[string]any{"access.callers": []any{"Team_a.ci-1"}}, goOK: true, schemaOK: true},
		"AccessCallerMax":        {set: map[string]any{"access.callers": []any{long(253)}}, goOK: true, schemaOK: true},
		"AccessCallerTooLong":    {set: map[string]any{"access.callers": []any{long(254)}}},
		"AccessCallerDot":        {set: map[string]any{"access.callers": []any{"."}}, schemaOK: true, why: goRange},
	}
	checkBounds(t, "route", v1alpha1.KindModelRoute, base, func(b []byte) error {
		s := &v1alpha1.ModelRouteSpec{}
		if err := json.Unmarshal(b, s); err != nil {
			return err
		}
		return s.Validate()
	}, rows)
}

// clientIDs are n distinct client IDs.
func clientIDs(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = fmt.Sprintf("caller-%d", i)
	}
	return out
}
