package gateway

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/crossplane/function-sdk-go/errors"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/decode"
	"github.com/modelplaneai/function-inference-gateway/internal/gatewayready"
	"github.com/modelplaneai/function-inference-gateway/internal/input/v1beta1"
	"github.com/modelplaneai/function-inference-gateway/internal/upstream"
)

// What a ModelRoute reads of its InferenceGateway: this file is the whole
// contract between the two composers, and package route uses nothing else
// of this package. A ModelRoute requires its InferenceGateway by Kind and
// reads its spec (ReadRouteView) and its GatewayReady condition
// (ReadVerdict); on the gateway cluster it attaches to the Gateway's
// listeners (ParentRef) and watches the gateway-status ConfigMap
// (StatusKey*), whose reason is one of GatewayReady's.

// Kind is the composite kind this package composes.
const Kind = v1alpha1.KindInferenceGateway

// ConditionType is the condition this package reports on an
// InferenceGateway; package gatewayready judges it.
const ConditionType = gatewayready.ConditionType

// ReasonClusterAlreadyHasGateway is GatewayReady's reason while another
// InferenceGateway serves on the same cluster; the gateway composes nothing
// there, and a ModelRoute on it says so rather than wait for it. Every
// reason of GatewayReady is in package gatewayready.
const ReasonClusterAlreadyHasGateway = gatewayready.ReasonClusterAlreadyHasGateway

// reasonWaitingForPreviousGateway: the gateway waits for the previous
// gateway of its cluster to be gone before it composes there (cluster.go).
const reasonWaitingForPreviousGateway = gatewayready.ReasonWaitingForPreviousGateway

// ReasonSpecRefused is GatewayReady's reason while the function refuses the
// InferenceGateway's spec: the gateway keeps serving what it composed
// before (refused.go).
const ReasonSpecRefused = gatewayready.ReasonSpecRefused

// RollingOut reports whether GatewayReady's reason is the Envoy
// Deployment's rollout, whose end comes by itself, usually within a minute
// (gatewayready.RollingOut).
func RollingOut(reason string) bool { return gatewayready.RollingOut(reason) }

// Verdict is the gateway's readiness and why.
type Verdict struct {
	Ready bool
	// Reported: GatewayReady is True or False, not Unknown or missing.
	Reported bool
	Reason   string
	Message  string
	// Since is the condition's lastTransitionTime. Crossplane stamps each
	// condition a function returns with the time of the reconcile and
	// keeps the one it had when status, reason and message are unchanged
	// (crossplane v2.3.0 internal/controller/apiextensions/composite/
	// composition_functions.go, FunctionComposer.Compose, and reconciler.go
	// calling SetConditions; crossplane apis v2.4.0 core/v2/condition.go,
	// Condition.Equal), so a copy that carries an older one is an older
	// verdict.
	Since time.Time
}

// VerdictNotReported is the reason ReadVerdict gives an InferenceGateway
// without a GatewayReady condition.
const VerdictNotReported = "NotReported"

// ReadVerdict reads the GatewayReady condition of an observed
// InferenceGateway, as a ModelRoute sees it through a required resource.
// A missing condition, or an Unknown one, is not Reported: Crossplane sets
// a function's condition Unknown, reason FatalError, when the pipeline
// returned a Fatal result or could not be run (crossplane v2.2.0 and v2.3.0
// internal/controller/apiextensions/composite/reconciler.go, Reconcile),
// and then applies nothing, so the gateway's other evidence is as old as
// its last successful reconcile.
func ReadVerdict(xr map[string]any) (Verdict, error) {
	st := struct {
		Conditions []metav1.Condition `json:"conditions"`
	}{}
	if err := decode.Into("the InferenceGateway", "status", xr["status"], &st); err != nil {
		return Verdict{}, err
	}
	c := meta.FindStatusCondition(st.Conditions, ConditionType)
	if c == nil {
		return Verdict{Reason: VerdictNotReported, Message: "the gateway has not reported " + ConditionType + " yet"}, nil
	}
	reported := c.Status == metav1.ConditionTrue || c.Status == metav1.ConditionFalse
	return Verdict{Ready: upstream.IsTrue(c), Reported: reported, Reason: c.Reason, Message: c.Message, Since: c.LastTransitionTime.Time}, nil
}

// Listener names. Model routes bind to one of them by sectionName.
const (
	ListenerHTTP  = "http"
	ListenerHTTPS = "https"
)

// ParentRef attaches a route to the gateway. sectionName picks a listener;
// empty attaches to all of them.
func ParentRef(in *v1beta1.Input, sectionName string) gwapiv1.ParentReference {
	p := gwapiv1.ParentReference{
		Group:     ptr.To(gwapiv1.Group(upstream.GatewayAPIGroup)),
		Kind:      ptr.To(gwapiv1.Kind("Gateway")),
		Name:      gwapiv1.ObjectName(in.GatewayName),
		Namespace: new(gwapiv1.Namespace(in.GatewayNamespace)),
	}
	if sectionName != "" {
		p.SectionName = new(gwapiv1.SectionName(sectionName))
	}
	return p
}

// Keys of the gateway-status ConfigMap.
const (
	// StatusKeyReady holds GatewayReady's status, "True" or "False".
	StatusKeyReady = "gatewayReady"
	// StatusKeyReason holds GatewayReady's reason.
	StatusKeyReason = "reason"
	// StatusKeyReportingSince holds when the gateway last began to report
	// GatewayReady again after a reconcile that could not (reportingSince).
	StatusKeyReportingSince = "reportingSince"
	// StatusKeyListener holds the listener routes attach to (RouteView's
	// TLS), and StatusKeyClientCertificate whether the gateway presents a
	// client certificate (RouteView's ClientCertificate), "true" or
	// "false". A route reads both from the InferenceGateway's spec; they
	// are here so that a change of either wakes every route through the
	// ConfigMap's watch, as GatewayReady's does: a ready route otherwise
	// looks again only at its TTL (route.ReadyRequeue).
	StatusKeyListener          = "listener"
	StatusKeyClientCertificate = "clientCertificate"
)

// RouteView is what a ModelRoute uses of its InferenceGateway's spec: the
// whole contract between the two composers. Everything else in the spec is
// the gateway's own business.
type RouteView struct {
	// ProviderConfigName names the provider-kubernetes
	// ClusterProviderConfig that reaches the gateway's cluster, where the
	// ModelRoute composes too.
	ProviderConfigName string

	// TLS: the gateway terminates TLS, so routes attach to its https
	// listener (ListenerHTTPS) rather than its http one.
	TLS bool

	// ClientCertificate: the gateway has spec.backendTLS.clientCertificate,
	// so Envoy presents a client certificate to backends that ask for one.
	ClientCertificate bool

	// UnprefixedModelNamespaces are the namespaces whose ModelRoutes may
	// serve model names that start with no namespace
	// (spec.modelNames.unprefixedNamespaces; v1alpha1.ModelRefusal).
	UnprefixedModelNamespaces []string

	// AuthMethod is the caller authentication the gateway reports in
	// status.auth.method: v1alpha1.AuthMethodAPIKey, None, or "" before
	// its first reconcile. A ModelRoute's spec.access is enforced only
	// with APIKey, which sets the caller header it matches.
	AuthMethod string
	// ClientIDs are the client IDs of the caller Secrets the gateway uses
	// (status.auth.clientIDs), sorted.
	ClientIDs []string
}

// ReadRouteView reads the fields of an InferenceGateway's spec that a
// ModelRoute uses, and only those, and its status.auth: what the gateway
// reports it enforces, rather than what its spec asks, which its last
// reconcile may not have composed. It does not apply the gateway's own rules
// (readSpec): a gateway whose spec breaks one of them, or a rule made
// stricter by a new version of the function, stops that gateway's reconcile,
// not every ModelRoute on it, whose RoutingReady follows GatewayReady anyway.
func ReadRouteView(xr map[string]any) (RouteView, error) {
	spec, _ := xr["spec"].(map[string]any)
	name, _ := spec["providerConfigName"].(string)
	if strings.TrimSpace(name) == "" {
		return RouteView{}, errors.New("cannot read the InferenceGateway: spec.providerConfigName is not set; set it to the provider-kubernetes ClusterProviderConfig that reaches the gateway's cluster")
	}
	v := RouteView{ProviderConfigName: name}
	// As InferenceGatewaySpec.TLSEnabled: an object, even an empty one, turns TLS on.
	switch tls := spec["tls"].(type) {
	case nil:
	case map[string]any:
		v.TLS = true
	default:
		return RouteView{}, errors.Errorf("cannot read the InferenceGateway: spec.tls is a %T, but must be an object; fix spec.tls", tls)
	}
	// Only well-formed entries grant anything: an entry of another type
	// grants nothing, and the gateway's own reconcile refuses the spec.
	mn, _ := spec["modelNames"].(map[string]any)
	list, _ := mn["unprefixedNamespaces"].([]any)
	for _, x := range list {
		if ns, ok := x.(string); ok {
			v.UnprefixedModelNamespaces = append(v.UnprefixedModelNamespaces, ns)
		}
	}
	switch bt := spec["backendTLS"].(type) {
	case nil:
	case map[string]any:
		_, v.ClientCertificate = bt["clientCertificate"].(map[string]any)
	default:
		return RouteView{}, errors.Errorf("cannot read the InferenceGateway: spec.backendTLS is a %T, but must be an object; fix spec.backendTLS", bt)
	}
	// The function writes status.auth; anything else there reads as not
	// reported, which a route with spec.access treats as no caller auth.
	st := struct {
		Auth *v1alpha1.AuthStatus `json:"auth"`
	}{}
	if decode.Into("the InferenceGateway", "status", xr["status"], &st) == nil && st.Auth != nil {
		v.AuthMethod, v.ClientIDs = st.Auth.Method, st.Auth.ClientIDs
	}
	return v, nil
}
