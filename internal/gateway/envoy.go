package gateway

import (
	aigv1b1 "github.com/envoyproxy/ai-gateway/api/v1beta1"
	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
)

// Envoy Gateway's labels on the Envoy pods of a Gateway (gateway v1.8.3
// internal/gatewayapi/translator.go, OwningGatewayNameLabel and
// OwningGatewayNamespaceLabel).
const (
	labelOwningGatewayName      = "gateway.envoyproxy.io/owning-gateway-name"
	labelOwningGatewayNamespace = "gateway.envoyproxy.io/owning-gateway-namespace"
)

// spreadTopologyKeys are the node and zone labels the Envoy pods are
// spread over (the well-known Kubernetes labels).
var spreadTopologyKeys = []string{corev1.LabelHostname, corev1.LabelTopologyZone}

// spread keeps the Envoy pods on different nodes and zones, so one node or
// zone going down leaves a pod serving. Envoy Gateway copies the
// constraints into the pod template as they are and fills in no selector
// (gateway v1.8.3 internal/infrastructure/kubernetes/proxy/
// resource_provider.go, Deployment), so they select this Gateway's Envoy
// pods by Envoy Gateway's owning-gateway labels themselves, and
// matchLabelKeys pod-template-hash counts only the pods of the same
// template, so that a rollout's old pods do not skew the new ones.
func (b builder) spread() []corev1.TopologySpreadConstraint {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{
		labelOwningGatewayName:      b.in.GatewayName,
		labelOwningGatewayNamespace: b.in.GatewayNamespace,
	}}
	out := make([]corev1.TopologySpreadConstraint, len(spreadTopologyKeys))
	for i, k := range spreadTopologyKeys {
		out[i] = corev1.TopologySpreadConstraint{
			MaxSkew:           1,
			TopologyKey:       k,
			WhenUnsatisfiable: b.spec.WhenUnsatisfiable(),
			LabelSelector:     sel,
			MatchLabelKeys:    []string{"pod-template-hash"},
		}
	}
	return out
}

// serviceAccount names the ServiceAccount the Envoy pods run as, when
// spec.envoy.serviceAccountName sets one. Envoy Gateway server-side
// applies a ServiceAccount of that name where it runs the Envoy pods, its
// own namespace (b.in.EnvoyGatewayNamespace, where the Envoy Deployment
// is observed), runs the pods as it, and deletes it with the Envoy infra
// (gateway v1.8.3 api/v1alpha1/envoyproxy_types.go, EnvoyServiceAccount;
// internal/infrastructure/kubernetes/proxy/resource_provider.go,
// serviceAccountName and ServiceAccount; infra.go, delete).
func (b builder) serviceAccount() *egv1a1.KubernetesServiceAccountSpec {
	if b.spec.Envoy == nil || b.spec.Envoy.ServiceAccountName == nil {
		return nil
	}
	return &egv1a1.KubernetesServiceAccountSpec{Name: new(*b.spec.Envoy.ServiceAccountName)}
}

// infrastructureAnnotations are spec.envoy.serviceAccountAnnotations, as
// the Gateway's infrastructure annotations: the one way Envoy Gateway
// annotates the ServiceAccount it creates. It puts them on every resource
// it creates for the Gateway, the Deployment's pod template included
// (gateway v1.8.3 internal/gatewayapi/translator.go,
// infrastructureAnnotations; internal/infrastructure/kubernetes/proxy/
// resource_provider.go, ServiceAccount and Deployment), so the pods roll
// with a change and start with the identity the annotations give.
func (b builder) infrastructureAnnotations() map[gwapiv1.AnnotationKey]gwapiv1.AnnotationValue {
	if b.spec.Envoy == nil || len(b.spec.Envoy.ServiceAccountAnnotations) == 0 {
		return nil
	}
	out := make(map[gwapiv1.AnnotationKey]gwapiv1.AnnotationValue, len(b.spec.Envoy.ServiceAccountAnnotations))
	for k, v := range b.spec.Envoy.ServiceAccountAnnotations {
		out[gwapiv1.AnnotationKey(k)] = gwapiv1.AnnotationValue(v)
	}
	return out
}

// aiGatewayMetadata is the dynamic-metadata namespace AI Gateway's
// ext-proc writes per request: the llmRequestCosts of the route under their
// metadataKey (the ModelRoute's names.InputTokensKey, OutputTokensKey and
// TotalTokensKey), backend_name, model_name_override and response_model
// (ai-gateway v1.0.0 api/v1beta1/shared_types.go,
// AIGatewayFilterMetadataNamespace; internal/extproc/processor_impl.go,
// buildDynamicMetadata).
const aiGatewayMetadata = aigv1b1.AIGatewayFilterMetadataNamespace

// CallerMetadataKey is where, in AI Gateway's metadata namespace, Envoy
// keeps the caller's client ID for the access log. The log cannot read the
// header itself: %REQ(...)% reads the request headers when the line is
// written, after the upstream ext_proc has removed the headers an
// AIServiceBackend removes (names.CallerHeader is one for every backend
// that may not see it). AI Gateway's extension server, run with
// LogRequestHeaderAttributes, inserts a header_to_metadata filter right
// before the router that copies the header into this key (ai-gateway
// v1.0.0 internal/extensionserver/header_to_metadata.go,
// insertRequestHeaderToMetadataFilter), after caller authentication has
// set it and before any upstream filter runs.
const CallerMetadataKey = "caller"

// LogRequestHeaderAttributes is the value AI Gateway's controller must run
// with as -logRequestHeaderAttributes (its chart's
// controller.logRequestHeaderAttributes) for the access log to name the
// caller. Setting the flag replaces AI Gateway's default mapping of
// agent-session-id to session.id (ai-gateway v1.0.0
// internal/requestheaderattrs/resolve.go, ResolveLog), so it is kept.
const LogRequestHeaderAttributes = "agent-session-id:session.id," + names.CallerHeader + ":" + CallerMetadataKey

// accessLogFields is the JSON access log: one line per request with the
// caller, the model, the backend and the token counts, in Envoy's command
// operators. The caller is the client ID caller authentication forwards in
// names.CallerHeader, as copied into dynamic metadata (CallerMetadataKey),
// and the client address.
var accessLogFields = map[string]string{
	"start_time":     "%START_TIME%",
	"method":         "%REQ(:METHOD)%",
	"path":           "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
	"response_code":  "%RESPONSE_CODE%",
	"response_flags": "%RESPONSE_FLAGS%",
	"duration_ms":    "%DURATION%",
	"client_address": "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%",
	"caller":         "%DYNAMIC_METADATA(" + aiGatewayMetadata + ":" + CallerMetadataKey + ")%",
	"model":          "%REQ(" + names.ModelHeader + ")%",
	"response_model": "%DYNAMIC_METADATA(" + aiGatewayMetadata + ":response_model)%",
	"backend":        "%DYNAMIC_METADATA(" + aiGatewayMetadata + ":backend_name)%",
	"upstream_host":  "%UPSTREAM_HOST%",
	"input_tokens":   "%DYNAMIC_METADATA(" + aiGatewayMetadata + ":" + names.InputTokensKey + ")%",
	"output_tokens":  "%DYNAMIC_METADATA(" + aiGatewayMetadata + ":" + names.OutputTokensKey + ")%",
	"total_tokens":   "%DYNAMIC_METADATA(" + aiGatewayMetadata + ":" + names.TotalTokensKey + ")%",
}

// telemetry is the JSON access log to Envoy's stdout, or nil when
// spec.envoy.accessLog.enabled is false, which leaves whatever the
// GatewayClass's EnvoyProxy says (the EnvoyProxy is merged over it).
// Envoy Gateway puts the access log into each listener's configuration
// (gateway v1.8.3 internal/gatewayapi/listener.go, processAccessLog).
func (b builder) telemetry() *egv1a1.ProxyTelemetry {
	if !b.spec.AccessLogEnabled() {
		return nil
	}
	return &egv1a1.ProxyTelemetry{AccessLog: &egv1a1.ProxyAccessLog{Settings: []egv1a1.ProxyAccessLogSetting{{
		Format: &egv1a1.ProxyAccessLogFormat{Type: ptr.To(egv1a1.ProxyAccessLogFormatTypeJSON), JSON: accessLogFields},
		Sinks: []egv1a1.ProxyAccessLogSink{{
			Type: egv1a1.ProxyAccessLogSinkTypeFile,
			File: &egv1a1.FileEnvoyProxyAccessLog{Path: "/dev/stdout"},
		}},
	}}}}
}
