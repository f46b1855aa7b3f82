package fn

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// Fixtures shared by the tests: observed provider-kubernetes Objects as
// provider-kubernetes reports them, and the objects their manifests hold.

const t0 = "2026-11-30T00:00:00Z"

type obj = map[string]any

func cond(typ string, status bool, reason, msg string) obj {
	s := "False"
	if status {
		s = "True"
	}
	c := obj{"type": typ, "status": s, "reason": reason, "lastTransitionTime": t0}
	if msg != "" {
		c["message"] = msg
	}
	return c
}

// object is an observed Object. manifest nil means the provider has not
// reported; synced false means its last observation failed.
func object(name string, manifest obj, synced, ready bool) obj {
	o := obj{
		"apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
		"kind":       "Object",
		"metadata": obj{
			"name": name, "namespace": "modelplane-system", "uid": "u-" + name, "resourceVersion": "42", "generation": 1,
			"annotations":   obj{"crossplane.io/composition-resource-name": name},
			"managedFields": []any{obj{"manager": "crossplane"}},
		},
		"spec": obj{
			"forProvider":       obj{"manifest": obj{"apiVersion": "v1", "kind": "Placeholder"}},
			"providerConfigRef": obj{"kind": "ClusterProviderConfig", "name": "gpu-cluster-1"},
		},
	}
	if manifest == nil {
		o["status"] = obj{}
		return o
	}
	conds := []any{cond("Synced", synced, "ReconcileSuccess", ""), cond("Ready", ready, "Available", "")}
	if !synced {
		conds[0] = cond("Synced", false, "ReconcileError", "cannot observe external resource: external resource does not exist")
	}
	for _, c := range conds {
		c.(obj)["observedGeneration"] = 1
	}
	o["metadata"].(obj)["finalizers"] = []any{"finalizer.managedresource.crossplane.io"}
	o["status"] = obj{"conditions": conds, "atProvider": obj{"manifest": manifest}}
	return o
}

// withReferences gives an observed Object the references a credential
// carries once its key is copied, synced at its current generation.
func withReferences(o obj) obj {
	o["spec"].(obj)["references"] = []any{obj{"patchesFrom": obj{"apiVersion": "v1", "kind": "Secret", "name": "key-a", "namespace": "ml-team", "fieldPath": "data[api-key]"}, "toFieldPath": "data.apiKey"}}
	return o
}

// policyManifest is a policy whose status.ancestors says whether Envoy
// Gateway accepted it for the Gateway.
func policyManifest(kind string, accepted bool) obj {
	return obj{"apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": kind, "metadata": obj{"name": "x"}, "status": obj{"ancestors": []any{obj{
		"ancestorRef":    obj{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference-gateway", "namespace": "modelplane-system"},
		"controllerName": "gateway.envoyproxy.io/gatewayclass-controller",
		"conditions":     []any{cond("Accepted", accepted, "Accepted", "Policy has been accepted.")},
	}}}}
}

// rateLimitDisabled is Envoy Gateway's message on a BackendTrafficPolicy
// with global rate limits when its config does not enable rate limiting
// (gateway v1.8.3 internal/gatewayapi/backendtrafficpolicy.go,
// buildGlobalRateLimit, wrapped by buildTrafficFeatures and
// status.Error2ConditionMsg).
const rateLimitDisabled = "RateLimit: enable Ratelimit in the EnvoyGateway config to configure global rateLimit."

// refusedPolicyManifest is an Envoy Gateway policy that Envoy Gateway
// refused for the Gateway, Accepted=False Invalid with msg.
func refusedPolicyManifest(kind, msg string) obj {
	return obj{"apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": kind, "metadata": obj{"name": "x"}, "status": obj{"ancestors": []any{obj{
		"ancestorRef":    obj{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference-gateway", "namespace": "modelplane-system"},
		"controllerName": "gateway.envoyproxy.io/gatewayclass-controller",
		"conditions":     []any{cond("Accepted", false, "Invalid", msg)},
	}}}}
}

// httpRouteManifest is the generated HTTPRoute with Envoy Gateway's
// Accepted and ResolvedRefs for the Gateway.
func httpRouteManifest(accepted, resolved bool) obj {
	return obj{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": obj{"name": "qwen"}, "status": obj{"parents": []any{obj{
		"parentRef":      obj{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference-gateway", "namespace": "modelplane-system", "sectionName": "http"},
		"controllerName": "gateway.envoyproxy.io/gatewayclass-controller",
		"conditions":     []any{cond("Accepted", accepted, "Accepted", "Route is accepted"), cond("ResolvedRefs", resolved, "ResolvedRefs", "Resolved all the Object references for the Route")},
	}}}}
}

// gatewayManifest is the Gateway at generation 1, with the address if
// any, and both listeners http and https Programmed with their references
// resolved, as Envoy Gateway reports them once it has judged generation 1.
func gatewayManifest(addr string) obj {
	st := obj{"listeners": []any{listenerStatus("http", true, "", ""), listenerStatus("https", true, "", "")}}
	if addr != "" {
		st["addresses"] = []any{obj{"type": "IPAddress", "value": addr}}
	}
	return obj{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": obj{"name": "inference-gateway", "namespace": "modelplane-system", "generation": 1}, "status": st}
}

// listenerStatus is a listener's status.listeners entry at generation 1:
// Programmed and ResolvedRefs True, or, when !ok, as Envoy Gateway writes
// them for a listener whose certificate is invalid (ResolvedRefs False with
// reason and msg, Programmed False, Invalid).
func listenerStatus(name string, ok bool, reason, msg string) obj {
	conds := []any{
		cond("Programmed", true, "Programmed", "Sending translated listener configuration to the data plane"),
		cond("Accepted", true, "Accepted", "Listener has been successfully translated"),
		cond("ResolvedRefs", true, "ResolvedRefs", "Listener references have been resolved"),
	}
	if !ok {
		conds[0] = cond("Programmed", false, "Invalid", "Listener is invalid, see other Conditions for details.")
		conds[2] = cond("ResolvedRefs", false, reason, msg)
	}
	for _, c := range conds {
		c.(obj)["observedGeneration"] = 1
	}
	return obj{"name": name, "attachedRoutes": 0, "supportedKinds": []any{obj{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}}, "conditions": conds}
}

func acceptedManifest(kind, name string, accepted bool) obj {
	st := obj{}
	if accepted {
		st["conditions"] = []any{cond("Accepted", true, "ReconciliationSucceeded", "reconciled successfully")}
	}
	return obj{"apiVersion": "aigateway.envoyproxy.io/v1beta1", "kind": kind, "metadata": obj{"name": name}, "status": st}
}

func plainManifest(kind string) obj {
	return obj{"apiVersion": "v1", "kind": kind, "metadata": obj{"name": "x"}, "spec": obj{}}
}

// deploymentManifest is the Envoy Deployment as the provider reads it, with
// numbers as float64 and zero counters absent, as JSON has them.
func deploymentManifest(gen, observed float64, marker bool, replicas, updated, available float64) obj {
	st := obj{}
	for k, v := range map[string]float64{"observedGeneration": observed, "replicas": replicas, "updatedReplicas": updated, "availableReplicas": available, "readyReplicas": available} {
		if v != 0 {
			st[k] = v
		}
	}
	tmd := obj{"labels": obj{"app.kubernetes.io/name": "envoy"}}
	if marker {
		tmd["annotations"] = obj{"aigateway.envoyproxy.io/extproc-config-hash": "9c1f"}
	}
	return obj{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": obj{"name": "envoy-modelplane-system-inference-gateway", "namespace": "envoy-gateway-system", "generation": gen},
		"spec":     obj{"replicas": 2.0, "template": obj{"metadata": tmd}},
		"status":   st,
	}
}

func mustStruct(t testing.TB, m obj) *structpb.Struct {
	t.Helper()
	// Round-trip through JSON so ints become float64, as over gRPC.
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	s := &structpb.Struct{}
	if err := s.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	return s
}

// newRequest builds a RunFunctionRequest.
func newRequest(t testing.TB, xr obj, observed map[string]obj, required map[string][]obj) *fnv1.RunFunctionRequest {
	t.Helper()
	req := &fnv1.RunFunctionRequest{
		Meta:     &fnv1.RequestMeta{Tag: "test"},
		Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: mustStruct(t, xr)}, Resources: map[string]*fnv1.Resource{}},
		Desired:  &fnv1.State{},
	}
	for n, o := range observed {
		req.Observed.Resources[n] = &fnv1.Resource{Resource: mustStruct(t, o)}
	}
	if required != nil {
		req.RequiredResources = map[string]*fnv1.Resources{}
		for n, items := range required {
			rs := &fnv1.Resources{}
			for _, it := range items {
				rs.Items = append(rs.Items, &fnv1.Resource{Resource: mustStruct(t, it)})
			}
			req.RequiredResources[n] = rs
		}
	}
	return req
}

// newAt returns a Function whose clock stands still at now.
func newAt(now time.Time) *Function {
	f := New(logging.NewNopLogger())
	f.now = func() time.Time { return now }
	return f
}

func run(t testing.TB, req *fnv1.RunFunctionRequest) *fnv1.RunFunctionResponse {
	t.Helper()
	rsp, err := New(logging.NewNopLogger()).RunFunction(t.Context(), req)
	if err != nil {
		t.Fatalf("RunFunction returned an error; it must always return a response: %v", err)
	}
	if rsp == nil {
		t.Fatal("RunFunction returned no response")
	}
	return rsp
}

// summary is the part of a response a table case asserts on.
type summary struct {
	// Conditions as "Type=Status/Reason".
	Conditions []string
	// Resources maps each desired composed resource to its readiness.
	Resources map[string]string
	// XRReady is the desired composite's readiness.
	XRReady string
	// Results as "SEVERITY: message".
	Results []string
}

func summarize(rsp *fnv1.RunFunctionResponse) summary {
	s := summary{Resources: map[string]string{}, XRReady: rsp.GetDesired().GetComposite().GetReady().String()}
	for _, c := range rsp.GetConditions() {
		s.Conditions = append(s.Conditions, fmt.Sprintf("%s=%s/%s", c.GetType(), c.GetStatus(), c.GetReason()))
	}
	for n, r := range rsp.GetDesired().GetResources() {
		s.Resources[n] = r.GetReady().String()
	}
	for _, r := range rsp.GetResults() {
		s.Results = append(s.Results, fmt.Sprintf("%s: %s", r.GetSeverity(), r.GetMessage()))
	}
	sort.Strings(s.Results)
	return s
}

func condition(rsp *fnv1.RunFunctionResponse, typ string) *fnv1.Condition {
	for _, c := range rsp.GetConditions() {
		if c.GetType() == typ {
			return c
		}
	}
	return nil
}

// manifest returns the forProvider manifest of a desired Object.
func manifest(rsp *fnv1.RunFunctionResponse, name string) obj {
	r := rsp.GetDesired().GetResources()[name]
	if r == nil {
		return nil
	}
	spec, _ := r.GetResource().AsMap()["spec"].(obj)
	fp, _ := spec["forProvider"].(obj)
	m, _ := fp["manifest"].(obj)
	return m
}

func status(rsp *fnv1.RunFunctionResponse) obj {
	st, _ := rsp.GetDesired().GetComposite().GetResource().AsMap()["status"].(obj)
	return st
}

// noLeak runs the function on req with a logger at full verbosity and
// fails the test if the response or the log holds any of secrets, named
// what in the failure.
func noLeak(t *testing.T, req *fnv1.RunFunctionRequest, secrets []string, what string) {
	t.Helper()
	var logs bytes.Buffer
	log := logging.NewLogrLogger(funcr.New(func(prefix, args string) { logs.WriteString(prefix + args + "\n") }, funcr.Options{Verbosity: 10}))
	rsp, err := New(log).RunFunction(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	out, err := protojson.Marshal(rsp)
	if err != nil {
		t.Fatal(err)
	}
	if logs.Len() == 0 {
		t.Fatal("the logger recorded nothing; the log check would prove nothing")
	}
	// leaked searches every form a key takes there (leak_test.go): protojson
	// and the logger escape a PEM key's newlines, so its raw value never
	// appears.
	if n := leaked(string(out), secrets); n > 0 {
		t.Errorf("%s (%d of them) leaked into the response: %s", what, n, out)
	}
	if n := leaked(logs.String(), secrets); n > 0 {
		t.Errorf("%s (%d of them) leaked into the logs: %s", what, n, logs.String())
	}
}

// expectFatal checks that rsp is one Fatal result whose message holds
// each of want.
func expectFatal(t *testing.T, rsp *fnv1.RunFunctionResponse, want ...string) {
	t.Helper()
	rs := rsp.GetResults()
	if len(rs) != 1 || rs[0].GetSeverity() != fnv1.Severity_SEVERITY_FATAL {
		t.Fatalf("want one Fatal result, got %v", rs)
	}
	for _, w := range want {
		if !strings.Contains(rs[0].GetMessage(), w) {
			t.Errorf("the Fatal %q lacks %q", rs[0].GetMessage(), w)
		}
	}
}

// expectRefused checks the answer to a composite whose spec the function
// refuses after it composed (compose.Refuse): no Fatal; one Warning and
// the condition condType False, SpecRefused, both holding want; and every
// observed composed resource desired exactly as observed, but the
// gateway's gateway-status ConfigMap, which says SpecRefused.
func expectRefused(t *testing.T, req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, condType, want string) {
	t.Helper()
	var warnings []string
	for _, r := range rsp.GetResults() {
		if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
			t.Fatalf("a Fatal result for a composite that composed before: %s", r.GetMessage())
		}
		if r.GetSeverity() == fnv1.Severity_SEVERITY_WARNING {
			warnings = append(warnings, r.GetMessage())
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], want) {
		t.Errorf("want one Warning containing %q, got %q", want, warnings)
	}
	c := condition(rsp, condType)
	if c.GetStatus() != fnv1.Status_STATUS_CONDITION_FALSE || c.GetReason() != "SpecRefused" || !strings.Contains(c.GetMessage(), want) {
		t.Errorf("%s is %s %s: %q, want False SpecRefused containing %q", condType, c.GetStatus(), c.GetReason(), c.GetMessage(), want)
	}
	desired := rsp.GetDesired().GetResources()
	if len(desired) != len(req.GetObserved().GetResources()) {
		t.Errorf("desired %d resources, observed %d: a refused spec must keep every one", len(desired), len(req.GetObserved().GetResources()))
	}
	for n, o := range req.GetObserved().GetResources() {
		d := desired[n]
		if d == nil {
			t.Errorf("observed %s is no longer desired", n)
			continue
		}
		want := o.GetResource().AsMap()["spec"]
		got := d.GetResource().AsMap()["spec"]
		if n == "gateway-status" && condType == "GatewayReady" {
			data := got.(obj)["forProvider"].(obj)["manifest"].(obj)["data"].(obj)
			if data["gatewayReady"] != "False" || data["reason"] != "SpecRefused" {
				t.Errorf("the gateway-status ConfigMap says %v, want gatewayReady False, reason SpecRefused", data)
			}
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s is not desired as observed: -observed, +desired:\n%s", n, diff)
		}
	}
}
