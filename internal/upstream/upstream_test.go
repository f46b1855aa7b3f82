package upstream

import (
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/rollout"
)

type obj = map[string]any

func cond(typ, status, reason, msg string) obj {
	return obj{"type": typ, "status": status, "reason": reason, "message": msg, "lastTransitionTime": "2026-11-30T00:00:00Z"}
}

func TestRouteAccepted(t *testing.T) {
	cases := map[string]struct {
		reason string
		route  obj
		want   *metav1.Condition
	}{
		"NoStatus": {
			reason: "AI Gateway has not reconciled the route yet.",
			route:  obj{},
		},
		"Accepted": {
			reason: "Accepted=True is returned as it is.",
			route:  obj{"status": obj{"conditions": []any{cond("Accepted", "True", "ReconciliationSucceeded", "ok")}}},
			want:   &metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "ReconciliationSucceeded", Message: "ok"},
		},
		"NotAccepted": {
			reason: "AI Gateway writes NotAccepted (True) when it fails: that is Accepted=False.",
			route:  obj{"status": obj{"conditions": []any{cond("NotAccepted", "True", "ReconciliationFailed", "AIServiceBackend qwen-a not found")}}},
			want:   &metav1.Condition{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "ReconciliationFailed", Message: "AIServiceBackend qwen-a not found"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := RouteAccepted(tc.route["status"])
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("%s\nRouteAccepted(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestPolicyAccepted(t *testing.T) {
	ancestor := func(ns, name, status string) obj {
		ref := obj{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": name}
		if ns != "" {
			ref["namespace"] = ns
		}
		return obj{"ancestorRef": ref, "controllerName": "gateway.envoyproxy.io/gatewayclass-controller", "conditions": []any{cond("Accepted", status, "Accepted", "")}}
	}
	cases := map[string]struct {
		reason string
		policy obj
		want   metav1.ConditionStatus // "" for no condition
	}{
		"None":           {reason: "No ancestor status yet.", policy: obj{}},
		"Ours":           {reason: "Our Gateway's ancestor says Accepted.", policy: obj{"status": obj{"ancestors": []any{ancestor("modelplane-system", "inference-gateway", "True")}}}, want: metav1.ConditionTrue},
		"OursRejected":   {reason: "Our Gateway's ancestor says not Accepted.", policy: obj{"status": obj{"ancestors": []any{ancestor("modelplane-system", "inference-gateway", "False")}}}, want: metav1.ConditionFalse},
		"NoNamespace":    {reason: "An ancestorRef without a namespace is in the policy's namespace.", policy: obj{"status": obj{"ancestors": []any{ancestor("", "inference-gateway", "True")}}}, want: metav1.ConditionTrue},
		"OtherGateway":   {reason: "Another Gateway's verdict is not ours.", policy: obj{"status": obj{"ancestors": []any{ancestor("modelplane-system", "other", "True")}}}},
		"OtherNamespace": {reason: "A Gateway of the same name elsewhere is not ours.", policy: obj{"status": obj{"ancestors": []any{ancestor("elsewhere", "inference-gateway", "True")}}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := PolicyAccepted(tc.policy["status"], "modelplane-system", "inference-gateway")
			if err != nil {
				t.Fatal(err)
			}
			var got metav1.ConditionStatus
			if c != nil {
				got = c.Status
			}
			if got != tc.want {
				t.Errorf("%s\nPolicyAccepted(...) = %q, want %q", tc.reason, got, tc.want)
			}
		})
	}
}

func TestRouteParentConditions(t *testing.T) {
	route := obj{"status": obj{"parents": []any{
		obj{"parentRef": obj{"name": "other", "namespace": "modelplane-system"}, "controllerName": "x", "conditions": []any{cond("Accepted", "True", "Accepted", "")}},
		obj{"parentRef": obj{"name": "inference-gateway", "namespace": "modelplane-system", "sectionName": "http"}, "controllerName": "x", "conditions": []any{cond("Accepted", "True", "Accepted", ""), cond("ResolvedRefs", "False", "BackendNotFound", "Backend qwen-a not found")}},
	}}}
	conds, ok, err := RouteParentConditions(route["status"], "modelplane-system", "inference-gateway", "http")
	if err != nil || !ok {
		t.Fatalf("RouteParentConditions(...) = %v, %v; want our parent's conditions", ok, err)
	}
	want := []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"},
		{Type: "ResolvedRefs", Status: metav1.ConditionFalse, Reason: "BackendNotFound", Message: "Backend qwen-a not found"},
	}
	if diff := cmp.Diff(want, conds, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
		t.Errorf("RouteParentConditions(...): -want, +got:\n%s", diff)
	}
	if _, ok, _ := RouteParentConditions(obj{}["status"], "modelplane-system", "inference-gateway", "http"); ok {
		t.Error("an HTTPRoute without status has no parent conditions")
	}
}

func TestGatewayAddress(t *testing.T) {
	gw := obj{"status": obj{"addresses": []any{obj{"type": "Hostname", "value": ""}, obj{"type": "IPAddress", "value": "203.0.113.10"}}}}
	st, err := GatewayStatus(gw["status"])
	if err != nil {
		t.Fatal(err)
	}
	if got := GatewayAddress(st); got != "203.0.113.10" {
		t.Errorf("GatewayAddress(...) = %q; want the first non-empty address", got)
	}
	if _, err := GatewayStatus(obj{"addresses": "nope"}); err == nil {
		t.Error("a malformed status.addresses must be an error")
	}
}

// TestCELQueries evaluates each readiness query the way provider-kubernetes
// does (one variable, object, of any type; v1.3 has no optional types) on
// objects that should and should not be ready.
func TestCELQueries(t *testing.T) {
	acceptedAt := func(gen int64) obj {
		return obj{"type": "Accepted", "status": "True", "reason": "Accepted", "observedGeneration": gen}
	}
	env, err := rollout.NewEnv()
	if err != nil {
		t.Fatal(err)
	}
	accepted := []any{cond("Accepted", "True", "Accepted", "")}
	cases := map[string]struct {
		query string
		obj   obj
		want  bool
	}{
		"AddressNone":            {CELHasAddress, obj{"status": obj{}}, false},
		"AddressSet":             {CELHasAddress, obj{"status": obj{"addresses": []any{obj{"value": "203.0.113.10"}}}}, true},
		"AcceptedNone":           {CELAccepted, obj{}, false},
		"AcceptedTrue":           {CELAccepted, obj{"status": obj{"conditions": accepted}}, true},
		"PolicyNoStatus":         {CELPolicyAccepted, obj{"spec": obj{}}, false},
		"PolicyAncestorNoConds":  {CELPolicyAccepted, obj{"status": obj{"ancestors": []any{obj{"ancestorRef": obj{"name": "gw"}}}}}, false},
		"PolicyAncestorAccepted": {CELPolicyAccepted, obj{"status": obj{"ancestors": []any{obj{"ancestorRef": obj{"name": "gw"}, "conditions": accepted}}}}, true},
		"PolicyAncestorRejected": {CELPolicyAccepted, obj{"status": obj{"ancestors": []any{obj{"conditions": []any{cond("Accepted", "False", "Invalid", "")}}}}}, false},
		"PolicyNowCurrent":       {CELPolicyAcceptedNow, obj{"metadata": obj{"generation": int64(3)}, "status": obj{"ancestors": []any{obj{"conditions": []any{acceptedAt(3)}}}}}, true},
		"PolicyNowStale":         {CELPolicyAcceptedNow, obj{"metadata": obj{"generation": int64(4)}, "status": obj{"ancestors": []any{obj{"conditions": []any{acceptedAt(3)}}}}}, false},
		"PolicyNowNoGeneration":  {CELPolicyAcceptedNow, obj{"metadata": obj{"generation": int64(4)}, "status": obj{"ancestors": []any{obj{"conditions": accepted}}}}, false},
		"PolicyNowRejected":      {CELPolicyAcceptedNow, obj{"metadata": obj{"generation": int64(3)}, "status": obj{"ancestors": []any{obj{"conditions": []any{obj{"type": "Accepted", "status": "False", "observedGeneration": int64(3)}}}}}}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ast, iss := env.Compile(tc.query)
			if iss.Err() != nil {
				t.Fatalf("cannot compile %q: %v", tc.query, iss.Err())
			}
			if ast.OutputType() != cel.BoolType {
				t.Fatalf("%q returns %s; provider-kubernetes wants bool", tc.query, ast.OutputType())
			}
			prg, err := env.Program(ast)
			if err != nil {
				t.Fatal(err)
			}
			out, _, err := prg.Eval(map[string]any{"object": tc.obj})
			if err != nil {
				t.Fatalf("cannot evaluate: %v", err)
			}
			if got := out.Value().(bool); got != tc.want {
				t.Errorf("%q on %v = %v, want %v", tc.query, tc.obj, got, tc.want)
			}
		})
	}
}
