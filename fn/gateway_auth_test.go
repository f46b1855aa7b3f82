package fn

import (
	"encoding/base64"
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// Caller keys as a Secret holds them (base64) and as a caller sends them.
var (
	aliceKey = "sk-alice-0123456789abcdef"
	bobKey   = "sk-bob-fedcba9876543210"
	carolKey = "sk-carol-5555aaaa5555aaaa"
	b64      = func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
)

func authSpec() obj {
	return obj{"providerConfigName": "gpu-cluster-1", "auth": obj{"method": "APIKey", "apiKey": obj{"secretSelector": obj{"matchLabels": obj{"modelplane.ai/callers": "true"}}}}}
}

// withSpec is spec with field set to v.
func withSpec(spec obj, field string, v any) obj {
	spec[field] = v
	return spec
}

// callerSecret is a selected caller Secret as Crossplane fetches it.
func callerSecret(name, version string, data obj) obj {
	s := obj{"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": obj{"name": name, "namespace": "modelplane-system", "resourceVersion": version, "labels": obj{"modelplane.ai/callers": "true"}}}
	if data != nil {
		s["data"] = data
	}
	return s
}

// callerCopy is the observed copy of a caller Secret: delivered at version
// (the control-plane Secret's resourceVersion) has the reference and the
// version annotation, applied and live, and is synced at its generation;
// with no version it was created without either and carries the
// provider's finalizer.
func callerCopy(name, version string) obj {
	m := plainManifest("Secret")
	if version != "" {
		m["metadata"].(obj)["annotations"] = obj{"modelplane.ai/callers-version": version}
	}
	o := object("caller-secret-"+name, m, true, true)
	if version != "" {
		o["spec"].(obj)["references"] = []any{obj{"patchesFrom": obj{"apiVersion": "v1", "kind": "Secret", "name": name, "namespace": "modelplane-system", "fieldPath": "data"}, "toFieldPath": "data"}}
		o["spec"].(obj)["forProvider"] = obj{"manifest": mustCopy(m)}
	}
	return o
}

// mustCopy is a deep copy of a fixture.
func mustCopy(m obj) obj {
	c := obj{}
	for k, v := range m {
		if o, ok := v.(obj); ok {
			v = mustCopy(o)
		}
		c[k] = v
	}
	return c
}

// callerPolicyObject is the observed SecurityPolicy, referencing refs (the
// gateway-cluster names), accepted or rejected with msg.
func callerPolicyObject(accepted bool, msg string, refs ...string) obj {
	m := policyManifest("SecurityPolicy", accepted)
	if msg != "" {
		m["status"].(obj)["ancestors"].([]any)[0].(obj)["conditions"] = []any{cond("Accepted", accepted, "Invalid", msg)}
	}
	o := object("caller-auth", m, true, accepted)
	if len(refs) > 0 {
		cr := make([]any, len(refs))
		for i, r := range refs {
			cr[i] = obj{"name": r}
		}
		o["spec"].(obj)["forProvider"] = obj{"manifest": obj{"apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "SecurityPolicy", "spec": obj{"apiKeyAuth": obj{"credentialRefs": cr}}}}
	}
	return o
}

// authObserved is a rolled-out gateway plus the given caller Objects.
func authObserved(extra map[string]obj) map[string]obj {
	o := observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true)
	maps.Copy(o, extra)
	return o
}

func TestGatewayCallerAuth(t *testing.T) {
	teamA := callerSecret("team-a", "7", obj{"alice": b64(aliceKey), "bob": b64(bobKey)})
	teamB := callerSecret("team-b", "9", obj{"carol": b64(carolKey)})
	// The copies' names on the gateway cluster, and their composition
	// resource names.
	const copyA, copyB = "inference-gateway-callers-team-a", "inference-gateway-callers-team-b"
	const resA, resB = "caller-secret-team-a", "caller-secret-team-b"

	type want struct {
		condition string
		message   []string
		// policy is "deny", "apiKey:<refs>" or "" when no policy is desired.
		policy string
		// copies maps each desired caller Secret copy, by composition
		// resource name, to whether it carries the reference that copies
		// the data.
		copies   map[string]bool
		warnings int
		status   obj
	}
	cases := map[string]struct {
		reason   string
		spec     obj
		observed map[string]obj
		required map[string][]obj
		want     want
	}{
		"NotFetchedYet": {
			reason:   "Crossplane has not fetched the selected Secrets: build no caller Object, and say what is awaited.",
			observed: authObserved(nil),
			want:     want{condition: "GatewayReady=STATUS_CONDITION_FALSE/CallerAuthNotAccepted", message: []string{"has not fetched the caller Secrets"}, copies: map[string]bool{}, status: obj{"method": "APIKey"}},
		},
		"NoSecretSelected": {
			reason:   "auth is set and no Secret is selected: fail closed with a deny-all policy, and name the selector and the fix.",
			observed: authObserved(map[string]obj{"caller-auth": callerPolicyObject(true, "")}),
			required: map[string][]obj{"caller-secrets": {}},
			want: want{condition: "GatewayReady=STATUS_CONDITION_FALSE/CallerSecretsMissing", policy: "deny", copies: map[string]bool{},
				message: []string{"modelplane.ai/callers=true", `selects no Secret in the namespace "modelplane-system"`, "denies every model request"}, status: obj{"method": "APIKey"}},
		},
		"FirstCopy": {
			reason:   "A selected Secret's copy is created without the reference first, so the provider's first Update cannot write the keys into the Object's spec; until it is delivered nobody gets in.",
			observed: authObserved(nil),
			required: map[string][]obj{"caller-secrets": {teamA}},
			want: want{condition: "GatewayReady=STATUS_CONDITION_FALSE/CallerAuthNotAccepted", policy: "deny", copies: map[string]bool{resA: false},
				message: []string{`the caller Secrets "team-a" are being copied`}, status: obj{"method": "APIKey"}},
		},
		"CopyStarts": {
			reason:   "The copy exists and is finalized: now it may carry the reference.",
			observed: authObserved(map[string]obj{"caller-secret-team-a": callerCopy("team-a", "")}),
			required: map[string][]obj{"caller-secrets": {teamA}},
			want:     want{condition: "GatewayReady=STATUS_CONDITION_FALSE/CallerAuthNotAccepted", policy: "deny", copies: map[string]bool{resA: true}, status: obj{"method": "APIKey"}},
		},
		"Enforced": {
			reason:   "The copy is delivered and Envoy Gateway accepted the policy: GatewayReady, with both clients counted.",
			observed: authObserved(map[string]obj{"caller-secret-team-a": callerCopy("team-a", "7"), "caller-auth": callerPolicyObject(true, "", copyA)}),
			required: map[string][]obj{"caller-secrets": {teamA}},
			want: want{condition: "GatewayReady=STATUS_CONDITION_TRUE/Serving", policy: "apiKey:" + copyA, copies: map[string]bool{resA: true},
				message: []string{"caller auth accepted"}, status: obj{"method": "APIKey", "secrets": []any{"team-a"}, "clients": 2.0, "clientIDs": []any{"alice", "bob"}}},
		},
		"PolicyRejected": {
			reason:   "Envoy Gateway rejected the policy: GatewayReady False with its message, because Envoy answers 500 meanwhile.",
			observed: authObserved(map[string]obj{"caller-secret-team-a": callerCopy("team-a", "7"), "caller-auth": callerPolicyObject(false, "APIKeyAuth: secret modelplane-system/x does not exist", copyA)}),
			required: map[string][]obj{"caller-secrets": {teamA}},
			want: want{condition: "GatewayReady=STATUS_CONDITION_FALSE/CallerAuthNotAccepted", policy: "apiKey:" + copyA, copies: map[string]bool{resA: true},
				message: []string{"answers 500", "APIKeyAuth: secret modelplane-system/x does not exist"}, status: obj{"method": "APIKey", "secrets": []any{"team-a"}, "clients": 2.0, "clientIDs": []any{"alice", "bob"}}},
		},
		"SecondSecretBeingCopied": {
			reason:   "Adding a caller Secret to a live gateway keeps the first in force and GatewayReady True while the second is copied.",
			observed: authObserved(map[string]obj{"caller-secret-team-a": callerCopy("team-a", "7"), "caller-auth": callerPolicyObject(true, "", copyA)}),
			required: map[string][]obj{"caller-secrets": {teamA, teamB}},
			want:     want{condition: "GatewayReady=STATUS_CONDITION_TRUE/Serving", policy: "apiKey:" + copyA, copies: map[string]bool{resA: true, resB: false}, status: obj{"method": "APIKey", "secrets": []any{"team-a"}, "clients": 2.0, "clientIDs": []any{"alice", "bob"}}},
		},
		"RotationBeingCopied": {
			reason:   "A rotated Secret changes its copy's version annotation; while the provider applies it, the policy keeps referencing it.",
			observed: authObserved(map[string]obj{"caller-secret-team-a": func() obj { o := callerCopy("team-a", "7"); o["metadata"].(obj)["generation"] = 2; return o }(), "caller-auth": callerPolicyObject(true, "", copyA)}),
			required: map[string][]obj{"caller-secrets": {teamA}},
			want:     want{condition: "GatewayReady=STATUS_CONDITION_TRUE/Serving", policy: "apiKey:" + copyA, copies: map[string]bool{resA: true}, status: obj{"method": "APIKey", "secrets": []any{"team-a"}, "clients": 2.0, "clientIDs": []any{"alice", "bob"}}},
		},
		"SecretRemovedStillReferenced": {
			reason:   "The only Secret is gone from the control plane: the policy turns to deny-all, and the copy stays while the observed policy still references it, so Envoy Gateway never sees a missing Secret.",
			observed: authObserved(map[string]obj{"caller-secret-team-a": callerCopy("team-a", "7"), "caller-auth": callerPolicyObject(true, "", copyA)}),
			required: map[string][]obj{"caller-secrets": {}},
			want: want{condition: "GatewayReady=STATUS_CONDITION_FALSE/CallerSecretsMissing", policy: "deny", copies: map[string]bool{resA: true},
				status: obj{"method": "APIKey"}},
		},
		"DuplicateKey": {
			reason:   "team-b gives carol alice's key: Envoy Gateway would reject the whole policy, so team-b is left out and named, never the key.",
			observed: authObserved(map[string]obj{"caller-secret-team-a": callerCopy("team-a", "7"), "caller-secret-team-b": callerCopy("team-b", "9"), "caller-auth": callerPolicyObject(true, "", copyA, copyB)}),
			required: map[string][]obj{"caller-secrets": {teamA, callerSecret("team-b", "9", obj{"carol": b64(aliceKey)})}},
			want: want{condition: "GatewayReady=STATUS_CONDITION_TRUE/Serving", policy: "apiKey:" + copyA, copies: map[string]bool{resA: true, resB: true}, warnings: 1,
				message: []string{`caller Secret "team-b" is not used: client ID "carol" has the same API key as client ID "alice"`}, status: obj{"method": "APIKey", "secrets": []any{"team-a"}, "clients": 2.0, "clientIDs": []any{"alice", "bob"}}},
		},
		"DuplicateClientID": {
			reason:   "bob is in both Secrets with different keys: both are used, Envoy Gateway takes team-a's, and the condition says so.",
			observed: authObserved(map[string]obj{"caller-secret-team-a": callerCopy("team-a", "7"), "caller-secret-team-b": callerCopy("team-b", "9"), "caller-auth": callerPolicyObject(true, "", copyA, copyB)}),
			required: map[string][]obj{"caller-secrets": {teamA, callerSecret("team-b", "9", obj{"bob": b64(carolKey)})}},
			want: want{condition: "GatewayReady=STATUS_CONDITION_TRUE/Serving", policy: "apiKey:" + copyA + "," + copyB, copies: map[string]bool{resA: true, resB: true}, warnings: 1,
				message: []string{`client ID "bob" is in the caller Secrets "team-a" and "team-b"`}, status: obj{"method": "APIKey", "secrets": []any{"team-a", "team-b"}, "clients": 2.0, "clientIDs": []any{"alice", "bob"}}},
		},
		"EmptySecret": {
			reason:   "A selected Secret without data has nothing to copy: it is named, and with nothing else selected the gateway denies all.",
			observed: authObserved(nil),
			required: map[string][]obj{"caller-secrets": {callerSecret("team-a", "7", nil)}},
			want: want{condition: "GatewayReady=STATUS_CONDITION_FALSE/CallerSecretsMissing", policy: "deny", copies: map[string]bool{}, warnings: 1,
				message: []string{`caller Secret "team-a" is not used: it has no data`}, status: obj{"method": "APIKey"}},
		},
		"BudgetCallerKnown": {
			reason:   "A budget's own limit for a client ID a selected Secret holds: nothing to warn of.",
			spec:     withSpec(authSpec(), "budgets", []any{obj{"tokens": "Total", "limit": 1000, "per": "Day", "callers": []any{obj{"name": "bob", "limit": 50}}}}),
			observed: authObserved(map[string]obj{"caller-secret-team-a": callerCopy("team-a", "7"), "caller-auth": callerPolicyObject(true, "", copyA)}),
			required: map[string][]obj{"caller-secrets": {teamA}},
			want: want{condition: "GatewayReady=STATUS_CONDITION_TRUE/Serving", policy: "apiKey:" + copyA, copies: map[string]bool{resA: true},
				status: obj{"method": "APIKey", "secrets": []any{"team-a"}, "clients": 2.0, "clientIDs": []any{"alice", "bob"}}},
		},
		"BudgetCallerUnknown": {
			reason:   "A budget's own limit for a name no selected Secret holds matches no request, so a misspelt caller stays on the default limit: warn, name the field and the Secrets, and keep serving.",
			spec:     withSpec(authSpec(), "budgets", []any{obj{"tokens": "Total", "limit": 1000, "per": "Day", "callers": []any{obj{"name": "bob", "limit": 50}, obj{"name": "bobb", "limit": 50}}}}),
			observed: authObserved(map[string]obj{"caller-secret-team-a": callerCopy("team-a", "7"), "caller-auth": callerPolicyObject(true, "", copyA)}),
			required: map[string][]obj{"caller-secrets": {teamA}},
			want: want{condition: "GatewayReady=STATUS_CONDITION_TRUE/Serving", policy: "apiKey:" + copyA, copies: map[string]bool{resA: true}, warnings: 1,
				message: []string{`spec.budgets[0].callers[1].name "bobb" is no client ID in the caller Secrets spec.auth.apiKey.secretSelector selects (team-a)`},
				status:  obj{"method": "APIKey", "secrets": []any{"team-a"}, "clients": 2.0, "clientIDs": []any{"alice", "bob"}}},
		},
		"AuthRemoved": {
			reason:   "spec.auth removed: the policy goes; the copy stays until the observed policy no longer references it.",
			spec:     obj{"providerConfigName": "gpu-cluster-1"},
			observed: authObserved(map[string]obj{"caller-secret-team-a": callerCopy("team-a", "7"), "caller-auth": callerPolicyObject(true, "", copyA)}),
			want:     want{condition: "GatewayReady=STATUS_CONDITION_TRUE/Serving", copies: map[string]bool{resA: true}, status: obj{"method": "None"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := tc.spec
			if spec == nil {
				spec = authSpec()
			}
			rsp := run(t, newRequest(t, gatewayXR(spec), tc.observed, tc.required))
			s := summarize(rsp)
			got := want{condition: s.Conditions[0], message: tc.want.message, copies: map[string]bool{}, status: status(rsp)["auth"].(obj)}
			if p := manifest(rsp, "caller-auth"); p != nil {
				got.policy = policyShape(p)
			}
			for n, r := range rsp.GetDesired().GetResources() {
				if !strings.HasPrefix(n, "caller-secret-") {
					continue
				}
				refs, _ := r.GetResource().AsMap()["spec"].(obj)["references"].([]any)
				got.copies[n] = len(refs) > 0
			}
			for _, r := range s.Results {
				if strings.HasPrefix(r, "SEVERITY_WARNING") {
					got.warnings++
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nRunFunction(...): -want, +got:\n%s", tc.reason, diff)
			}
			msg := condition(rsp, "GatewayReady").GetMessage()
			for _, m := range tc.want.message {
				if !strings.Contains(msg, m) {
					t.Errorf("%s\nGatewayReady message %q does not contain %q", tc.reason, msg, m)
				}
			}
			if spec["auth"] != nil {
				sel := rsp.GetRequirements().GetResources()["caller-secrets"]
				if sel.GetKind() != "Secret" || sel.GetNamespace() != "modelplane-system" || sel.GetMatchLabels().GetLabels()["modelplane.ai/callers"] != "true" {
					t.Errorf("%s\nrequirement caller-secrets = %v; want Secrets labelled modelplane.ai/callers=true in modelplane-system", tc.reason, sel)
				}
			}
		})
	}
}

// policyShape reduces a desired SecurityPolicy to "deny" or
// "apiKey:<credentialRefs>", after checking the parts every apiKeyAuth
// policy must have.
func policyShape(p obj) string {
	spec := p["spec"].(obj)
	if a, ok := spec["authorization"].(obj); ok {
		if a["defaultAction"] == "Deny" && a["rules"] == nil && spec["apiKeyAuth"] == nil {
			return "deny"
		}
		return "bad authorization"
	}
	k := spec["apiKeyAuth"].(obj)
	want := obj{"extractFrom": []any{obj{"headers": []any{"authorization", "x-api-key"}}}, "forwardClientIDHeader": "x-modelplane-caller", "sanitize": true}
	for f, v := range want {
		if !cmp.Equal(k[f], v) {
			return "bad " + f
		}
	}
	var refs []string
	for _, r := range k["credentialRefs"].([]any) {
		refs = append(refs, r.(obj)["name"].(string))
	}
	return "apiKey:" + strings.Join(refs, ",")
}

func TestGatewayOpenSaysSo(t *testing.T) {
	rsp := run(t, newRequest(t, gatewayXR(nil), observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true), nil))
	if diff := cmp.Diff([]string{openResult}, summarize(rsp).Results); diff != "" {
		t.Errorf("an open gateway must say so in a Normal result: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(obj{"method": "None"}, status(rsp)["auth"]); diff != "" {
		t.Errorf("status.auth: -want, +got:\n%s", diff)
	}
	if rsp.GetRequirements().GetResources()["caller-secrets"] != nil || rsp.GetDesired().GetResources()["caller-auth"] != nil {
		t.Error("an open gateway must neither require Secrets nor compose a SecurityPolicy")
	}
}

func TestGatewayAuthSpecErrors(t *testing.T) {
	cases := map[string]struct {
		auth obj
		want string
	}{
		"Method":      {obj{"method": "OIDC", "apiKey": obj{"secretSelector": obj{"matchLabels": obj{"a": "b"}}}}, `spec.auth.method "OIDC" is not supported; set "APIKey"`},
		"NoSelector":  {obj{"method": "APIKey"}, "spec.auth.apiKey.secretSelector.matchLabels is required with spec.auth"},
		"NoLabels":    {obj{"apiKey": obj{"secretSelector": obj{"matchLabels": obj{}}}}, "spec.auth.apiKey.secretSelector.matchLabels is required"},
		"BadKey":      {obj{"apiKey": obj{"secretSelector": obj{"matchLabels": obj{"bad key": "x"}}}}, `matchLabels key "bad key" is not a label key`},
		"BadValue":    {obj{"apiKey": obj{"secretSelector": obj{"matchLabels": obj{"a": "not ok!"}}}}, `matchLabels["a"] value "not ok!" is not a label value`},
		"WrongType":   {obj{"apiKey": obj{"secretSelector": obj{"matchLabels": "a=b"}}}, "spec.auth.apiKey.secretSelector.matchLabels is a JSON string"},
		"TooManyKeys": {obj{"apiKey": obj{"secretSelector": obj{"matchLabels": manyLabels(17)}}}, "has 17 labels; use at most 16"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := authSpec()
			spec["auth"] = tc.auth
			// A gateway that composed: it keeps serving, and says why not.
			req := newRequest(t, gatewayXR(spec), authObserved(nil), nil)
			expectRefused(t, req, run(t, req), "GatewayReady", tc.want)
			// A new one: Fatal, nothing to keep.
			rsp := run(t, newRequest(t, gatewayXR(spec), nil, nil))
			rs := rsp.GetResults()
			if len(rs) != 1 || rs[0].GetSeverity() != fnv1.Severity_SEVERITY_FATAL || !strings.Contains(rs[0].GetMessage(), tc.want) {
				t.Fatalf("a new gateway: want one Fatal result containing %q, got %v", tc.want, rs)
			}
			if len(rsp.GetDesired().GetResources()) != 0 {
				t.Error("a Fatal response must leave the desired resources alone, so nothing is deleted")
			}
		})
	}
}

func manyLabels(n int) obj {
	o := obj{}
	for i := range n {
		o[string(rune('a'+i))] = "x"
	}
	return o
}

// TestCallerKeysNeverLeak runs every caller-auth case with a logger that
// records everything at debug level, and checks that no caller key, raw
// or base64, appears in a desired resource, the composite, a condition, a
// result, a requirement or a log line.
func TestCallerKeysNeverLeak(t *testing.T) {
	dupKey := callerSecret("team-b", "9", obj{"carol": b64(aliceKey)})
	teamA := callerSecret("team-a", "7", obj{"alice": b64(aliceKey), "bob": b64(bobKey)})
	empty := callerSecret("team-c", "1", obj{"dave": ""})
	reqs := map[string]*fnv1.RunFunctionRequest{
		"FirstCopy": newRequest(t, gatewayXR(authSpec()), authObserved(nil), map[string][]obj{"caller-secrets": {teamA}}),
		"Enforced": newRequest(t, gatewayXR(authSpec()), authObserved(map[string]obj{"caller-secret-team-a": callerCopy("team-a", "7"), "caller-auth": callerPolicyObject(true, "", "inference-gateway-callers-team-a")}),
			map[string][]obj{"caller-secrets": {teamA}}),
		"Problems": newRequest(t, gatewayXR(authSpec()), authObserved(map[string]obj{"caller-secret-team-a": callerCopy("team-a", "7")}), map[string][]obj{"caller-secrets": {teamA, dupKey, empty, callerSecret("team-d", "2", obj{"bob": b64(carolKey)})}}),
		"Fatal":    newRequest(t, gatewayXR(obj{"auth": obj{"apiKey": obj{}}}), nil, map[string][]obj{"caller-secrets": {teamA}}),
	}
	secrets := []string{aliceKey, bobKey, carolKey, b64(aliceKey), b64(bobKey), b64(carolKey)}
	for name, req := range reqs {
		t.Run(name, func(t *testing.T) { noLeak(t, req, secrets, "a caller key") })
	}
}
