package fn

import (
	"testing"

	aigv1b1 "github.com/envoyproxy/ai-gateway/api/v1beta1"
	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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
	admit := func(reqs ...metav1.LabelSelectorRequirement) *gwapiv1.AllowedRoutes {
		return &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{
			From: new(gwapiv1.NamespacesFromSelector), Selector: &metav1.LabelSelector{MatchExpressions: reqs},
		}}
	}
	gatewayRef := gwapiv1.ParentReference{
		Group: new(gwapiv1.Group("gateway.networking.k8s.io")), Kind: new(gwapiv1.Kind("Gateway")),
		Name: "inference-gateway", Namespace: new(gwapiv1.Namespace("modelplane-system")),
	}

	envoyPods := &metav1.LabelSelector{MatchLabels: map[string]string{
		"gateway.envoyproxy.io/owning-gateway-name": "inference-gateway", "gateway.envoyproxy.io/owning-gateway-namespace": "modelplane-system",
	}}
	spreadOver := func(key string) corev1.TopologySpreadConstraint {
		return corev1.TopologySpreadConstraint{
			MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: envoyPods, MatchLabelKeys: []string{"pod-template-hash"},
		}
	}
	wantProxy := egv1a1.EnvoyProxySpec{
		MergeType: new(egv1a1.StrategicMerge),
		Provider: &egv1a1.EnvoyProxyProvider{
			Type: egv1a1.EnvoyProxyProviderTypeKubernetes,
			Kubernetes: &egv1a1.EnvoyProxyKubernetesProvider{
				EnvoyDeployment: &egv1a1.KubernetesDeploymentSpec{
					Name: new("envoy-modelplane-system-inference-gateway"), Replicas: new(int32(2)),
					Pod: &egv1a1.KubernetesPodSpec{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{
						spreadOver("kubernetes.io/hostname"), spreadOver("topology.kubernetes.io/zone"),
					}},
					Patch: &egv1a1.KubernetesPatchSpec{
						Type:  new(egv1a1.StrategicMerge),
						Value: apiextensionsv1.JSON{Raw: []byte(`{"spec":{"template":{"spec":{"dnsConfig":{"options":[{"name":"ndots","value":"1"}]}}}}}`)},
					},
				},
				EnvoyPDB: &egv1a1.KubernetesPodDisruptionBudgetSpec{MaxUnavailable: new(intstr.FromInt32(1))},
			},
		},
		Shutdown: &egv1a1.ShutdownConfig{DrainTimeout: new(gwapiv1.Duration("300s"))},
		Telemetry: &egv1a1.ProxyTelemetry{AccessLog: &egv1a1.ProxyAccessLog{Settings: []egv1a1.ProxyAccessLogSetting{{
			Format: &egv1a1.ProxyAccessLogFormat{Type: new(egv1a1.ProxyAccessLogFormatTypeJSON), JSON: map[string]string{
				"start_time":     "%START_TIME%",
				"method":         "%REQ(:METHOD)%",
				"path":           "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
				"response_code":  "%RESPONSE_CODE%",
				"response_flags": "%RESPONSE_FLAGS%",
				"duration_ms":    "%DURATION%",
				"client_address": "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%",
				"caller":         "%DYNAMIC_METADATA(io.envoy.ai_gateway:caller)%",
				"model":          "%REQ(x-ai-eg-model)%",
				"response_model": "%DYNAMIC_METADATA(io.envoy.ai_gateway:response_model)%",
				"backend":        "%DYNAMIC_METADATA(io.envoy.ai_gateway:backend_name)%",
				"upstream_host":  "%UPSTREAM_HOST%",
				"input_tokens":   "%DYNAMIC_METADATA(io.envoy.ai_gateway:llm_input_token)%",
				"output_tokens":  "%DYNAMIC_METADATA(io.envoy.ai_gateway:llm_output_token)%",
				"total_tokens":   "%DYNAMIC_METADATA(io.envoy.ai_gateway:llm_total_token)%",
			}},
			Sinks: []egv1a1.ProxyAccessLogSink{{Type: egv1a1.ProxyAccessLogSinkTypeFile, File: &egv1a1.FileEnvoyProxyAccessLog{Path: "/dev/stdout"}}},
		}}}},
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
			{Name: "http", Port: 80, Protocol: gwapiv1.HTTPProtocolType, AllowedRoutes: admit(
				metav1.LabelSelectorRequirement{Key: names.FrontDoorLabel, Operator: metav1.LabelSelectorOpExists},
			)},
			{
				Name: "https", Hostname: new(gwapiv1.Hostname("llm.example.com")), Port: 443, Protocol: gwapiv1.HTTPSProtocolType,
				TLS: &gwapiv1.ListenerTLSConfig{Mode: new(gwapiv1.TLSModeTerminate), CertificateRefs: []gwapiv1.SecretObjectReference{{Name: "llm-tls"}}},
				AllowedRoutes: admit(
					metav1.LabelSelectorRequirement{Key: names.TeamNamespaceLabel, Operator: metav1.LabelSelectorOpExists},
				),
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

	httpRef, httpsRef := gatewayRef, gatewayRef
	httpRef.SectionName = new(gwapiv1.SectionName("http"))
	httpsRef.SectionName = new(gwapiv1.SectionName("https"))
	wantFilter := egv1a1.HTTPRouteFilterSpec{DirectResponse: &egv1a1.HTTPDirectResponseFilter{
		ContentType: new("application/json"),
		Body:        &egv1a1.CustomResponseBody{Type: new(egv1a1.ResponseValueTypeInline), Inline: new(`{"status":"ok"}`)},
		StatusCode:  new(200),
	}}
	if diff := cmp.Diff(wantFilter, typedManifest[egv1a1.HTTPRouteFilterSpec](t, manifest(rsp, "healthz-filter"))); diff != "" {
		t.Errorf("health HTTPRouteFilter spec: -want, +got:\n%s", diff)
	}
	wantHealth := gwapiv1.HTTPRouteSpec{
		CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{httpRef, httpsRef}},
		Rules: []gwapiv1.HTTPRouteRule{{
			Matches: []gwapiv1.HTTPRouteMatch{{Path: &gwapiv1.HTTPPathMatch{Type: new(gwapiv1.PathMatchExact), Value: new("/healthz")}}},
			Filters: []gwapiv1.HTTPRouteFilter{{Type: gwapiv1.HTTPRouteFilterExtensionRef, ExtensionRef: &gwapiv1.LocalObjectReference{
				Group: "gateway.envoyproxy.io", Kind: "HTTPRouteFilter", Name: "inference-gateway-healthz",
			}}},
		}},
	}
	if diff := cmp.Diff(wantHealth, typedManifest[gwapiv1.HTTPRouteSpec](t, manifest(rsp, "healthz-route"))); diff != "" {
		t.Errorf("health HTTPRoute spec: -want, +got:\n%s", diff)
	}
	wantRedirect := gwapiv1.HTTPRouteSpec{
		CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{httpRef}},
		Rules: []gwapiv1.HTTPRouteRule{{
			Matches: []gwapiv1.HTTPRouteMatch{{Path: &gwapiv1.HTTPPathMatch{Type: new(gwapiv1.PathMatchPathPrefix), Value: new("/")}}},
			Filters: []gwapiv1.HTTPRouteFilter{{Type: gwapiv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gwapiv1.HTTPRequestRedirectFilter{
				Scheme: new("https"), Hostname: new(gwapiv1.PreciseHostname("llm.example.com")), StatusCode: new(308),
			}}},
		}},
	}
	if diff := cmp.Diff(wantRedirect, typedManifest[gwapiv1.HTTPRouteSpec](t, manifest(rsp, "https-redirect-route"))); diff != "" {
		t.Errorf("redirect HTTPRoute spec: -want, +got:\n%s", diff)
	}
	routeTarget := func(n string) gwapiv1.LocalPolicyTargetReferenceWithSectionName {
		return gwapiv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gwapiv1.LocalPolicyTargetReference{
			Group: "gateway.networking.k8s.io", Kind: "HTTPRoute", Name: gwapiv1.ObjectName(n),
		}}
	}
	wantPolicy := egv1a1.SecurityPolicySpec{
		PolicyTargetReferences: egv1a1.PolicyTargetReferences{TargetRefs: []gwapiv1.LocalPolicyTargetReferenceWithSectionName{
			routeTarget("inference-gateway-healthz"), routeTarget("inference-gateway-https-redirect"),
		}},
		Authorization: &egv1a1.Authorization{DefaultAction: new(egv1a1.AuthorizationActionAllow)},
	}
	if diff := cmp.Diff(wantPolicy, typedManifest[egv1a1.SecurityPolicySpec](t, manifest(rsp, "front-door-policy"))); diff != "" {
		t.Errorf("front door SecurityPolicy spec: -want, +got:\n%s", diff)
	}
	for n, ns := range map[string]string{"healthz-filter": "modelplane-system-front-door", "healthz-route": "modelplane-system-front-door", "https-redirect-route": "modelplane-system-front-door", "front-door-policy": "modelplane-system-front-door"} {
		if got := manifest(rsp, n)["metadata"].(obj)["namespace"]; got != ns {
			t.Errorf("%s is in namespace %v, want %s", n, got, ns)
		}
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
	observed := placed("local", "azure")
	observed["credential-azure"] = withReferences(object("credential-azure", plainManifest("Secret"), true, true))
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
