package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
)

// gatewayRBAC is the manifest a platform team applies to the gateway
// cluster to give provider-kubernetes its least-privilege identity there.
const gatewayRBAC = "deploy/gateway-cluster-rbac.yaml"

var (
	gvrSelfSubjectReview = schema.GroupVersionResource{Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews"}
	gvrSelfAccessReview  = schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectaccessreviews"}
)

// tokenLifetime is what the suite asks the TokenRequest API for: longer
// than any run, so the provider never holds an expired token.
const tokenLifetime = 6 * time.Hour

// rbacSettle bounds the wait for new bindings to take effect.
const rbacSettle = 30 * time.Second

// access is one request the gateway identity must, or must not, be allowed.
type access struct {
	verb, group, resource, namespace string
	allowed                          bool
	why                              string
}

// gatewayAccess is what deploy/gateway-cluster-rbac.yaml is meant to allow
// and deny, written out independently of it, so that widening the manifest
// fails here and not only in review.
func gatewayAccess() []access {
	team := names.TeamNamespace(TeamControlNS)
	return []access{
		{"create", "", "namespaces", "", true, "provider-kubernetes creates the gateway and team namespaces"},
		{"patch", "apps", "deployments", EnvoyGatewayNS, true, "Observe dry-run applies the observed Envoy Deployment"},
		{"list", "apps", "deployments", "", true, "the Envoy Deployment's watch is a cluster-wide informer"},
		{"watch", "gateway.networking.k8s.io", "httproutes", "", true, "the generated HTTPRoutes' watch is a cluster-wide informer"},
		{"patch", "gateway.networking.k8s.io", "httproutes", team, true, "Observe dry-run applies the observed HTTPRoute"},
		{"delete", "aigateway.envoyproxy.io", "aigatewayroutes", GatewayNS, true, "the anchor route goes with its InferenceGateway"},
		{"patch", "", "secrets", team, true, "the backends' API keys are applied into team namespaces"},
		{"create", "", "secrets", GatewayNS, true, "the callers' Secrets are copied into the gateway namespace"},
		{"watch", "gateway.envoyproxy.io", "securitypolicies", "", true, "the caller-auth SecurityPolicy's watch is a cluster-wide informer"},
		{"delete", "gateway.envoyproxy.io", "securitypolicies", GatewayNS, true, "the caller-auth policy goes when spec.auth is removed"},
		{"create", "", "configmaps", GatewayNS, true, "the gateway publishes GatewayReady in a ConfigMap"},
		{"watch", "aigateway.envoyproxy.io", "aigatewayroutes", "", true, "the model routes' watch is a cluster-wide informer"},
		{"watch", "aigateway.envoyproxy.io", "aiservicebackends", "", false, "AIServiceBackends are not watched"},
		{"watch", "gateway.networking.k8s.io", "gateways", "", true, "the Gateway's watch is a cluster-wide informer"},
		{"watch", "gateway.envoyproxy.io", "clienttrafficpolicies", "", true, "the traffic policies' watch is a cluster-wide informer"},
		{"watch", "gateway.envoyproxy.io", "envoyproxies", "", false, "the EnvoyProxy is not watched"},
		{"watch", "", "configmaps", "", true, "every ModelRoute watches the gateway-status ConfigMap; the informer is cluster-wide"},
		{"watch", "cert-manager.io", "certificates", "", true, "the client Certificate's watch is a cluster-wide informer"},
		{"create", "cert-manager.io", "issuers", GatewayNS, true, "the CA Issuer of spec.backendTLS.clientCertificate.caSecretRef"},
		{"watch", "cert-manager.io", "issuers", "", false, "the Issuer is not watched"},
		{"create", "cert-manager.io", "clusterissuers", "", false, "a ClusterIssuer is the user's, only named"},
		{"create", "cert-manager.io", "certificaterequests", GatewayNS, false, "cert-manager makes the CertificateRequests"},
		{"delete", "", "namespaces", "", false, "namespaces are never deleted"},
		{"update", "", "namespaces", "", false, "server-side apply is a PATCH; nothing needs update"},
		{"patch", "apps", "deployments", "kube-system", false, "only Envoy Gateway's namespace holds an observed Deployment"},
		{"create", "apps", "deployments", EnvoyGatewayNS, false, "the Envoy Deployment is only observed"},
		{"delete", "apps", "deployments", EnvoyGatewayNS, false, "the Envoy Deployment is only observed"},
		{"delete", "gateway.networking.k8s.io", "httproutes", team, false, "AI Gateway owns the HTTPRoutes; they are only observed"},
		{"list", "", "secrets", "", false, "Secrets are read by name, never listed"},
		{"get", "", "secrets", EnvoyGatewayNS, true, "AI Gateway's filter-config Secret is observed, the evidence for the function's own ext-proc marker"},
		{"patch", "", "secrets", EnvoyGatewayNS, true, "Observe dry-run applies the observed filter-config Secret"},
		{"watch", "", "secrets", "", false, "the filter-config Secret is observed, never watched"},
		{"create", "gateway.networking.k8s.io", "httproutes", names.FrontDoorNamespace(GatewayNS), true, "the front door's health and redirect routes"},
		{"create", "gateway.envoyproxy.io", "httproutefilters", names.FrontDoorNamespace(GatewayNS), true, "the health check's direct response"},
		{"patch", "gateway.envoyproxy.io", "securitypolicies", names.FrontDoorNamespace(GatewayNS), true, "the front door's allow-all policy"},
		{"patch", "", "secrets", GatewayNS, true, "TLS Secrets are copied into the gateway namespace"},
		{"update", "", "configmaps", GatewayNS, false, "server-side apply is a PATCH; nothing needs update"},
		{"create", "", "pods", EnvoyGatewayNS, false, "nothing composed is a pod"},
		{"create", "gateway.envoyproxy.io", "envoyextensionpolicies", GatewayNS, false, "nothing composed is an extension policy"},
	}
}

// gatewayIdentity applies deploy/gateway-cluster-rbac.yaml as it is, gets
// a token for its ServiceAccount from the TokenRequest API (the API server
// signs it with --service-account-signing-key-file), and checks that the
// token authenticates as that ServiceAccount, outside system:masters, and
// is allowed exactly what gatewayAccess says. It returns the
// ServiceAccount's user name and the token.
func (c *Cluster) gatewayIdentity(ctx context.Context) (string, string) {
	objs := c.ReadYAMLFile(gatewayRBAC)
	c.Apply(ctx, objs...)
	var sas []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetKind() == "ServiceAccount" {
			sas = append(sas, u)
		}
	}
	if len(sas) != 1 {
		c.tb.Fatalf("cannot find the one ServiceAccount in %s: found %d", gatewayRBAC, len(sas))
	}
	sa := sas[0]
	user := "system:serviceaccount:" + sa.GetNamespace() + ":" + sa.GetName()

	tr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "authentication.k8s.io/v1",
		"kind":       "TokenRequest",
		"metadata":   map[string]any{"name": sa.GetName(), "namespace": sa.GetNamespace()},
		"spec":       map[string]any{"expirationSeconds": int64(tokenLifetime / time.Second)},
	}}
	out, err := c.Dyn.Resource(gvrServiceAccount).Namespace(sa.GetNamespace()).Create(ctx, tr, metav1.CreateOptions{}, "token")
	if err != nil {
		c.tb.Fatalf("cannot request a token for %s: %v", user, err)
	}
	token, _, _ := unstructured.NestedString(out.Object, "status", "token")
	if token == "" {
		c.tb.Fatalf("cannot find status.token in the TokenRequest for %s", user)
	}

	cfg := rest.CopyConfig(c.cfg)
	cfg.BearerToken = token
	dyn, err := dynamic.NewForConfig(cfg)
	Must(c.tb, err)
	rev, err := dyn.Resource(gvrSelfSubjectReview).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
	}}, metav1.CreateOptions{})
	if err != nil {
		c.tb.Fatalf("cannot review the gateway identity's token: %v", err)
	}
	got, _, _ := unstructured.NestedString(rev.Object, "status", "userInfo", "username")
	groups, _, _ := unstructured.NestedStringSlice(rev.Object, "status", "userInfo", "groups")
	if got != user || slices.Contains(groups, "system:masters") {
		c.tb.Fatalf("the gateway token authenticates as %q in %v, want %q outside system:masters", got, groups, user)
	}

	// RBAC reads bindings from an informer, so a binding just created may
	// take a moment to count: wait for the table to hold, and report what
	// does not if it never does.
	var wrong []string
	wctx, cancel := context.WithTimeout(ctx, rbacSettle)
	defer cancel()
	err = WaitFor(wctx, nil, 200*time.Millisecond, "the gateway identity's access", func(ctx context.Context) (bool, error) {
		wrong = wrong[:0]
		for _, a := range gatewayAccess() {
			allowed, err := selfAccess(ctx, dyn, a)
			if err != nil {
				return false, err
			}
			if allowed != a.allowed {
				wrong = append(wrong, fmt.Sprintf("%s %s in %q: allowed=%t, want %t (%s)", a.verb, a.resource, a.namespace, allowed, a.allowed, a.why))
			}
		}
		return len(wrong) == 0, nil
	})
	switch {
	case len(wrong) > 0:
		c.tb.Fatalf("%s does not grant what it should:\n%s", gatewayRBAC, strings.Join(wrong, "\n"))
	case err != nil:
		c.tb.Fatal(err)
	}
	c.tb.Logf("provider-kubernetes reaches the gateway cluster as %s (%s)", user, gatewayRBAC)
	return user, token
}

// selfAccess asks the API server whether the client's own identity may do a.
func selfAccess(ctx context.Context, dyn dynamic.Interface, a access) (bool, error) {
	ssar := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "authorization.k8s.io/v1",
		"kind":       "SelfSubjectAccessReview",
		"spec": map[string]any{"resourceAttributes": map[string]any{
			"verb": a.verb, "group": a.group, "resource": a.resource, "namespace": a.namespace,
		}},
	}}
	out, err := dyn.Resource(gvrSelfAccessReview).Create(ctx, ssar, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("cannot review access to %s %s: %w", a.verb, a.resource, err)
	}
	allowed, _, _ := unstructured.NestedBool(out.Object, "status", "allowed")
	return allowed, nil
}
