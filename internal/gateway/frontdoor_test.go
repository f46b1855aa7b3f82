package gateway

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/input/v1beta1"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
)

// admitted lists the listeners of the composed Gateway that admit routes
// from a namespace with the given labels, the way Gateway API evaluates
// allowedRoutes.namespaces with From: Selector.
func admitted(t *testing.T, b builder, nsLabels map[string]string) []string {
	t.Helper()
	gw := b.gateway().Spec.ForProvider.Manifest.(*remote.Manifest[gwapiv1.GatewaySpec])
	var out []string
	for _, l := range gw.Spec.Listeners {
		ns := l.AllowedRoutes.Namespaces
		if ns == nil || ns.From == nil || *ns.From != gwapiv1.NamespacesFromSelector {
			t.Fatalf("listener %q admits %v, not by selector: every listener must admit by label, or the gateway namespace and its anchor may become served", l.Name, ns)
		}
		sel, err := metav1.LabelSelectorAsSelector(ns.Selector)
		if err != nil {
			t.Fatalf("listener %q has a bad selector: %v", l.Name, err)
		}
		if sel.Matches(labels.Set(nsLabels)) {
			out = append(out, string(l.Name))
		}
	}
	return out
}

// namespaceLabels are the labels of a composed Namespace.
func namespaceLabels(o *remote.Object) map[string]string {
	return o.Spec.ForProvider.Manifest.(*remote.Manifest[struct{}]).Metadata.Labels
}

// TestListenerAdmission fails if any listener ever admits the gateway
// namespace, where the anchor route lives: Envoy Gateway would then serve
// its header match. It also checks that the health check's namespace is
// admitted on every listener (load balancers probe 443 too), and the team
// namespaces only where models are served.
func TestListenerAdmission(t *testing.T) {
	in := (&v1beta1.Input{}).WithDefaults()
	tls := &v1alpha1.InferenceGatewaySpec{ProviderConfigName: "c", Hostname: "llm.example.com", TLS: &v1alpha1.TLS{CertificateRefs: []v1alpha1.CertificateRef{{Name: "llm-tls"}}}}
	team := map[string]string{names.TeamNamespaceLabel: "ml-team"}
	cases := map[string]struct {
		spec                          *v1alpha1.InferenceGatewaySpec
		gatewayNS, frontDoorNS, teams []string
	}{
		"PlainHTTP": {spec: &v1alpha1.InferenceGatewaySpec{ProviderConfigName: "c"}, frontDoorNS: []string{ListenerHTTP}, teams: []string{ListenerHTTP}},
		"TLS":       {spec: tls, frontDoorNS: []string{ListenerHTTP, ListenerHTTPS}, teams: []string{ListenerHTTPS}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := builder{in: in, spec: tc.spec}
			if diff := cmp.Diff(tc.gatewayNS, admitted(t, b, namespaceLabels(b.namespace()))); diff != "" {
				t.Errorf("listeners admitting the gateway namespace (the anchor's): -want, +got:\n%s", diff)
			}
			if diff := cmp.Diff(tc.frontDoorNS, admitted(t, b, namespaceLabels(b.frontDoorNamespace()))); diff != "" {
				t.Errorf("listeners admitting the front door (health check, redirect): -want, +got:\n%s", diff)
			}
			if diff := cmp.Diff(tc.teams, admitted(t, b, team)); diff != "" {
				t.Errorf("listeners admitting a team namespace: -want, +got:\n%s", diff)
			}
		})
	}
}

// TestFrontDoorRoutesBind checks which listeners the health and redirect
// routes attach to, by sectionName: the health check on every listener, the
// redirect on plain HTTP only (on https it would loop); both in the
// front-door namespace, never in the gateway namespace.
func TestFrontDoorRoutesBind(t *testing.T) {
	in := (&v1beta1.Input{}).WithDefaults()
	plain := builder{in: in, spec: &v1alpha1.InferenceGatewaySpec{ProviderConfigName: "c"}}
	tls := builder{in: in, spec: &v1alpha1.InferenceGatewaySpec{ProviderConfigName: "c", Hostname: "llm.example.com", TLS: &v1alpha1.TLS{CertificateRefs: []v1alpha1.CertificateRef{{Name: "x"}}}}}
	http, https := ParentRef(in, ListenerHTTP), ParentRef(in, ListenerHTTPS)
	for name, tc := range map[string]struct {
		route *remote.Object
		want  []gwapiv1.ParentReference
	}{
		"health without TLS": {route: plain.healthRoute(), want: []gwapiv1.ParentReference{http}},
		"health with TLS":    {route: tls.healthRoute(), want: []gwapiv1.ParentReference{http, https}},
		"redirect":           {route: tls.redirectRoute(), want: []gwapiv1.ParentReference{http}},
	} {
		m := tc.route.Spec.ForProvider.Manifest.(*remote.Manifest[gwapiv1.HTTPRouteSpec])
		if m.Metadata.Namespace != names.FrontDoorNamespace(in.GatewayNamespace) || m.Metadata.Namespace == in.GatewayNamespace {
			t.Errorf("the %s route is in %q, want the front-door namespace %q", name, m.Metadata.Namespace, names.FrontDoorNamespace(in.GatewayNamespace))
		}
		if diff := cmp.Diff(tc.want, m.Spec.ParentRefs); diff != "" {
			t.Errorf("the %s route's parentRefs: -want, +got:\n%s", name, diff)
		}
	}
}
