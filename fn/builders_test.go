package fn

import (
	"testing"

	aigv1b1 "github.com/envoyproxy/ai-gateway/api/v1beta1"
	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1a2 "sigs.k8s.io/gateway-api/apis/v1alpha2"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
)

// TestGatewayBuilders compares each manifest an InferenceGateway composes
// with the whole typed spec the scenario should give, so a reader sees
// what is sent.
func TestGatewayBuilders(t *testing.T) {
	rsp := run(t, newRequest(t, gatewayXR(tlsSpec), nil, nil))
	admit := &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{
		From: new(gwapiv1.NamespacesFromSelector),
		Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: names.TeamNamespaceLabel, Operator: metav1.LabelSelectorOpExists,
		}}},
	}}
	gatewayRef := gwapiv1.ParentReference{
		Group: new(gwapiv1.Group("gateway.networking.k8s.io")), Kind: new(gwapiv1.Kind("Gateway")),
		Name: "inference-gateway", Namespace: new(gwapiv1.Namespace("modelplane-system")),
	}

	wantProxy := egv1a1.EnvoyProxySpec{
		MergeType: new(egv1a1.StrategicMerge),
		Provider: &egv1a1.EnvoyProxyProvider{
			Type: egv1a1.EnvoyProxyProviderTypeKubernetes,
			Kubernetes: &egv1a1.EnvoyProxyKubernetesProvider{
				EnvoyDeployment: &egv1a1.KubernetesDeploymentSpec{Name: new("envoy-modelplane-system-inference-gateway"), Replicas: new(int32(2))},
				EnvoyPDB:        &egv1a1.KubernetesPodDisruptionBudgetSpec{MaxUnavailable: new(intstr.FromInt32(1))},
			},
		},
	}
	if diff := cmp.Diff(wantProxy, typedManifest[egv1a1.EnvoyProxySpec](t, manifest(rsp, "envoy-proxy"))); diff != "" {
		t.Errorf("EnvoyProxy spec: -want, +got:\n%s", diff)
	}

	wantGateway := gwapiv1.GatewaySpec{
		GatewayClassName: "envoy",
		Infrastructure: &gwapiv1.GatewayInfrastructure{ParametersRef: &gwapiv1.LocalParametersReference{
			Group: "gateway.envoyproxy.io", Kind: "EnvoyProxy", Name: "inference-gateway",
		}},
		Listeners: []gwapiv1.Listener{
			{Name: "http", Port: 80, Protocol: gwapiv1.HTTPProtocolType, AllowedRoutes: admit},
			{
				Name: "https", Hostname: new(gwapiv1.Hostname("llm.example.com")), Port: 443, Protocol: gwapiv1.HTTPSProtocolType,
				TLS:           &gwapiv1.ListenerTLSConfig{Mode: new(gwapiv1.TLSModeTerminate), CertificateRefs: []gwapiv1.SecretObjectReference{{Name: "llm-tls"}}},
				AllowedRoutes: admit,
			},
		},
	}
	if diff := cmp.Diff(wantGateway, typedManifest[gwapiv1.GatewaySpec](t, manifest(rsp, "gateway"))); diff != "" {
		t.Errorf("Gateway spec: -want, +got:\n%s", diff)
	}

	wantAnchor := aigv1b1.AIGatewayRouteSpec{
		ParentRefs: []gwapiv1.ParentReference{gatewayRef},
		Rules: []aigv1b1.AIGatewayRouteRule{{Matches: []aigv1b1.AIGatewayRouteRuleMatch{{Headers: []gwapiv1.HTTPHeaderMatch{{
			Type: new(gwapiv1.HeaderMatchExact), Name: "x-modelplane-gateway-anchor", Value: "true",
		}}}}}},
	}
	if diff := cmp.Diff(wantAnchor, typedManifest[aigv1b1.AIGatewayRouteSpec](t, manifest(rsp, "anchor-route"))); diff != "" {
		t.Errorf("anchor AIGatewayRoute spec: -want, +got:\n%s", diff)
	}
}

// TestRouteBuilders does the same for a ModelRoute with a plain in-cluster
// backend and an Azure backend with a key, on a TLS gateway.
func TestRouteBuilders(t *testing.T) {
	xr := routeXR(
		obj{"name": "local", "endpoint": obj{"hostname": "vllm.ml-team.svc.cluster.local", "port": 8000, "tls": false}, "schema": obj{"name": "OpenAI"}},
		obj{"name": "azure", "priority": 1, "endpoint": obj{"hostname": "team.openai.azure.com"}, "schema": obj{"name": "AzureOpenAI", "version": "2025-01-01-preview"},
			"apiKey": obj{"secretRef": obj{"name": "key-a", "key": "api-key"}}, "modelNameOverride": "gpt-4o"},
	)
	observed := map[string]obj{"credential-azure": withReferences(object("credential-azure", plainManifest("Secret"), true, true))}
	rsp := run(t, newRequest(t, xr, observed, map[string][]obj{"gateway": {inferenceGateway(true, "Serving", true)}, "secret-key-a": keyA}))

	wantRoute := aigv1b1.AIGatewayRouteSpec{
		ParentRefs: []gwapiv1.ParentReference{{
			Group: new(gwapiv1.Group("gateway.networking.k8s.io")), Kind: new(gwapiv1.Kind("Gateway")),
			Name: "inference-gateway", Namespace: new(gwapiv1.Namespace("modelplane-system")), SectionName: new(gwapiv1.SectionName("https")),
		}},
		Rules: []aigv1b1.AIGatewayRouteRule{{
			Matches: []aigv1b1.AIGatewayRouteRuleMatch{{Headers: []gwapiv1.HTTPHeaderMatch{{Type: new(gwapiv1.HeaderMatchExact), Name: "x-ai-eg-model", Value: "ml-team/qwen"}}}},
			BackendRefs: []aigv1b1.AIGatewayRouteRuleBackendRef{
				{Name: "qwen-local", Weight: new(int32(1)), Priority: new(uint32(0))},
				{Name: "qwen-azure", ModelNameOverride: "gpt-4o", Weight: new(int32(1)), Priority: new(uint32(1))},
			},
			Timeouts:      &gwapiv1.HTTPRouteTimeouts{Request: new(gwapiv1.Duration("600s"))},
			ModelsOwnedBy: new("ml-team"),
		}},
		LLMRequestCosts: []aigv1b1.LLMRequestCost{
			{MetadataKey: "llm_input_token", Type: aigv1b1.LLMRequestCostTypeInputToken},
			{MetadataKey: "llm_output_token", Type: aigv1b1.LLMRequestCostTypeOutputToken},
			{MetadataKey: "llm_total_token", Type: aigv1b1.LLMRequestCostTypeTotalToken},
		},
	}
	if diff := cmp.Diff(wantRoute, typedManifest[aigv1b1.AIGatewayRouteSpec](t, manifest(rsp, "route"))); diff != "" {
		t.Errorf("AIGatewayRoute spec: -want, +got:\n%s", diff)
	}

	wantBackends := map[string]egv1a1.BackendSpec{
		"backend-local": {Endpoints: []egv1a1.BackendEndpoint{{FQDN: &egv1a1.FQDNEndpoint{Hostname: "vllm.ml-team.svc.cluster.local", Port: 8000}}}},
		"backend-azure": {
			Endpoints: []egv1a1.BackendEndpoint{{FQDN: &egv1a1.FQDNEndpoint{Hostname: "team.openai.azure.com", Port: 443}}},
			TLS:       &egv1a1.BackendTLSSettings{WellKnownCACertificates: new(gwapiv1.WellKnownCACertificatesSystem), SNI: new(gwapiv1.PreciseHostname("team.openai.azure.com"))},
		},
	}
	for n, want := range wantBackends {
		if diff := cmp.Diff(want, typedManifest[egv1a1.BackendSpec](t, manifest(rsp, n))); diff != "" {
			t.Errorf("%s Backend spec: -want, +got:\n%s", n, diff)
		}
	}

	backendRef := func(n string) gwapiv1.BackendObjectReference {
		return gwapiv1.BackendObjectReference{Group: new(gwapiv1.Group("gateway.envoyproxy.io")), Kind: new(gwapiv1.Kind("Backend")), Name: gwapiv1.ObjectName(n)}
	}
	wantAI := map[string]aigv1b1.AIServiceBackendSpec{
		"aibackend-local": {APISchema: aigv1b1.VersionedAPISchema{Name: aigv1b1.APISchemaOpenAI, Prefix: new("/v1")}, BackendRef: backendRef("qwen-local")},
		// A third party's: the caller's identity is removed before it.
		"aibackend-azure": {
			APISchema: aigv1b1.VersionedAPISchema{Name: aigv1b1.APISchemaAzureOpenAI, Version: new("2025-01-01-preview")}, BackendRef: backendRef("qwen-azure"),
			HeaderMutation: &aigv1b1.HTTPHeaderMutation{Remove: []string{"x-modelplane-caller"}},
		},
	}
	for n, want := range wantAI {
		if diff := cmp.Diff(want, typedManifest[aigv1b1.AIServiceBackendSpec](t, manifest(rsp, n))); diff != "" {
			t.Errorf("%s AIServiceBackend spec: -want, +got:\n%s", n, diff)
		}
	}

	wantPolicy := aigv1b1.BackendSecurityPolicySpec{
		TargetRefs:  []gwapiv1a2.LocalPolicyTargetReference{{Group: "aigateway.envoyproxy.io", Kind: "AIServiceBackend", Name: "qwen-azure"}},
		Type:        aigv1b1.BackendSecurityPolicyTypeAzureAPIKey,
		AzureAPIKey: &aigv1b1.BackendSecurityPolicyAzureAPIKey{SecretRef: &gwapiv1.SecretObjectReference{Name: "qwen-azure"}},
	}
	if diff := cmp.Diff(wantPolicy, typedManifest[aigv1b1.BackendSecurityPolicySpec](t, manifest(rsp, "credpolicy-azure"))); diff != "" {
		t.Errorf("BackendSecurityPolicy spec: -want, +got:\n%s", diff)
	}
}
