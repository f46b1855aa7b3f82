package controlplane

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var gvrSecurityPolicy = schema.GroupVersionResource{Group: "gateway.envoyproxy.io", Version: "v1alpha1", Resource: "securitypolicies"}

// A SecurityPolicy that targets a Gateway Envoy Gateway handles gets
// status.ancestors from policyStatus (routes_test.go) like the traffic
// policies, and is then judged by Envoy Gateway v1.8.1's own rules for what
// the function composes: Accepted True, or False with reason Invalid and
// Envoy Gateway's message. For a Gateway-targeted policy Envoy Gateway runs
// no validateSecurityPolicy (that is only on the route path,
// internal/gatewayapi/securitypolicy.go, processSecurityPolicyForRoute); it
// translates the policy and reports every translation error
// (translateSecurityPolicyForGateway, the errors joined, each prefixed with
// its feature through pkg/errors.WithMessage, and the first letter made
// upper case by status.Error2ConditionMsg).

// translateSecurityPolicy returns the errors Envoy Gateway v1.8.1 finds
// translating the parts of a SecurityPolicy the function sets: apiKeyAuth
// (buildAPIKeyAuth) and authorization without rules (buildAuthorization,
// which cannot fail then).
func translateSecurityPolicy(p *unstructured.Unstructured, secret secretGetter) error {
	if _, ok, _ := unstructured.NestedMap(p.Object, "spec", "apiKeyAuth"); !ok {
		return nil
	}
	if err := buildAPIKeyAuth(p, secret); err != nil {
		return fmt.Errorf("APIKeyAuth: %w", err)
	}
	return nil
}

// buildAPIKeyAuth follows Envoy Gateway v1.8.1 buildAPIKeyAuth: each
// credentialRef must name a core Secret (validateSecretObjectRef), in the
// policy's namespace unless a ReferenceGrant allows another (this control
// plane has none), that exists (validateSecretRef); reading the Secrets in
// order, a client ID already seen is skipped, and a key that another client
// already has rejects the policy.
func buildAPIKeyAuth(p *unstructured.Unstructured, secret secretGetter) error {
	refs, _, _ := unstructured.NestedSlice(p.Object, "spec", "apiKeyAuth", "credentialRefs")
	seenKeys, seenClients := map[string]bool{}, map[string]bool{}
	for _, x := range refs {
		ref, _ := x.(map[string]any)
		name, _ := ref["name"].(string)
		if g, _ := ref["group"].(string); g != "" {
			return errors.New("secret ref group must be unspecified/empty")
		}
		if k, _ := ref["kind"].(string); k != "" && k != "Secret" {
			return errors.New("secret ref kind must be Secret")
		}
		ns := p.GetNamespace()
		if n, _ := ref["namespace"].(string); n != "" && n != ns {
			return fmt.Errorf("ref to Secret %s/%s not permitted by any ReferenceGrant", n, name)
		}
		data, found, err := secret(ns, name)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("secret %s/%s does not exist", ns, name)
		}
		for client, key := range data {
			if seenClients[client] {
				continue
			}
			if seenKeys[key] {
				return errors.New("duplicated API key")
			}
			seenKeys[key], seenClients[client] = true, true
		}
	}
	return nil
}

// secretGetter returns a Secret's data (base64 values, as the API serves
// them) and whether it exists.
type secretGetter func(ns, name string) (map[string]string, bool, error)

// secretData reads Secrets from the API server.
func (e *envoyGateway) secretData(ctx context.Context) secretGetter {
	return func(ns, name string) (map[string]string, bool, error) {
		s, err := e.c.dyn.Resource(gvrSecret).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		data, _, _ := unstructured.NestedStringMap(s.Object, "data")
		return data, true, nil
	}
}

// conditionMessage is Envoy Gateway's status.Error2ConditionMsg: the
// error's text with its first letter upper case.
func conditionMessage(err error) string {
	m := []rune(err.Error())
	if len(m) > 0 && unicode.IsLetter(m[0]) {
		m[0] = unicode.ToUpper(m[0])
	}
	return strings.TrimSpace(string(m))
}

// TestSecurityPolicyStandIn checks the stand-in's verdicts against Envoy
// Gateway v1.8.1's rules, without a control plane.
func TestSecurityPolicyStandIn(t *testing.T) {
	secrets := map[string]map[string]string{
		"gw/a":     {"alice": "a2V5LWE=", "bob": "a2V5LWI="},
		"gw/b":     {"carol": "a2V5LWM="},
		"gw/dup":   {"dave": "a2V5LWE="},
		"gw/same":  {"alice": "a2V5LWE="},
		"other/ok": {"erin": "a2V5LWU="},
	}
	get := func(ns, name string) (map[string]string, bool, error) {
		d, ok := secrets[ns+"/"+name]
		return d, ok, nil
	}
	policy := func(refs ...map[string]any) *unstructured.Unstructured {
		rs := make([]any, len(refs))
		for i, r := range refs {
			rs[i] = r
		}
		return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "p", "namespace": "gw"},
			"spec": map[string]any{"apiKeyAuth": map[string]any{"credentialRefs": rs}}}}
	}
	ref := func(name string) map[string]any { return map[string]any{"name": name} }
	cases := map[string]struct {
		p    *unstructured.Unstructured
		want string
	}{
		"Accepted":        {policy(ref("a"), ref("b")), ""},
		"DenyAll":         {&unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"authorization": map[string]any{"defaultAction": "Deny"}}}}, ""},
		"Missing":         {policy(ref("a"), ref("gone")), "APIKeyAuth: secret gw/gone does not exist"},
		"DuplicatedKey":   {policy(ref("a"), ref("dup")), "APIKeyAuth: duplicated API key"},
		"SameClientTwice": {policy(ref("a"), ref("same")), ""},
		"CrossNamespace":  {policy(map[string]any{"name": "ok", "namespace": "other"}), "APIKeyAuth: ref to Secret other/ok not permitted by any ReferenceGrant"},
		"NotASecret":      {policy(map[string]any{"name": "a", "kind": "ConfigMap"}), "APIKeyAuth: secret ref kind must be Secret"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ""
			if err := translateSecurityPolicy(tc.p, get); err != nil {
				got = conditionMessage(err)
			}
			if got != tc.want {
				t.Errorf("verdict %q, want %q", got, tc.want)
			}
		})
	}
}
