package fn

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/testing/protocmp"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
)

func gatewayXR(spec obj) obj {
	if spec == nil {
		spec = obj{"providerConfigName": "gpu-cluster-1", "replicas": 2}
	}
	return obj{"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceGateway", "metadata": obj{"name": "inference-gateway"}, "spec": spec}
}

// openResult is the Normal result of a gateway without spec.auth.
const openResult = "SEVERITY_NORMAL: the gateway is open: spec.auth is not set, so anyone who can reach it can call every model it serves; set spec.auth.apiKey.secretSelector to require an API key"

var tlsSpec = obj{"providerConfigName": "gpu-cluster-1", "hostname": "llm.example.com", "tls": obj{"certificateRefs": []any{obj{"name": "llm-tls"}}}}

// observedGateway is every gateway Object observed, with the given Envoy
// Deployment manifest (nil: not reported).
func observedGateway(addr string, anchorAccepted bool, dep obj, depSynced bool) map[string]obj {
	o := map[string]obj{
		"gateway-namespace": object("gateway-namespace", plainManifest("Namespace"), true, true),
		"client-policy":     object("client-policy", policyManifest("ClientTrafficPolicy", true), true, true),
		"envoy-proxy":       object("envoy-proxy", plainManifest("EnvoyProxy"), true, true),
		"gateway":           object("gateway", gatewayManifest(addr), true, addr != ""),
		"anchor-route":      object("anchor-route", acceptedManifest("AIGatewayRoute", "inference-gateway-anchor", anchorAccepted), true, anchorAccepted),
		"failover-policy":   object("failover-policy", policyManifest("BackendTrafficPolicy", true), true, true),
		"gateway-status":    object("gateway-status", plainManifest("ConfigMap"), true, true),
	}
	for _, n := range frontDoor() {
		o[n] = object(n, plainManifest("HTTPRoute"), true, true)
	}
	// The provider's own Ready is set True even where the function must
	// not trust it, to show the function reads the manifest instead.
	o["envoy-deployment"] = object("envoy-deployment", dep, depSynced, true)
	return o
}

var allGateway = append([]string{"anchor-route", "client-policy", "envoy-deployment", "envoy-proxy", "failover-policy", "gateway", "gateway-namespace", "gateway-status"}, frontDoor()...)

// frontDoor names the front door's Objects of a gateway without TLS.
func frontDoor() []string {
	return []string{"front-door-namespace", "healthz-filter", "healthz-route", "front-door-policy"}
}

func readiness(ready ...string) map[string]string {
	out := map[string]string{}
	for _, n := range allGateway {
		out[n] = fnv1.Ready_READY_FALSE.String()
	}
	for _, n := range ready {
		out[n] = fnv1.Ready_READY_TRUE.String()
	}
	return out
}

func TestRunFunctionInferenceGateway(t *testing.T) {
	rolled := deploymentManifest(2, 2, true, 2, 2, 2)
	type want struct {
		summary summary
		// message must contain each of these.
		message []string
	}
	cases := map[string]struct {
		reason string
		req    *fnv1.RunFunctionRequest
		want   want
	}{
		"Fresh": {
			reason: "Nothing is observed yet: compose everything, GatewayReady False because nothing is programmed.",
			req:    newRequest(t, gatewayXR(nil), nil, nil),
			want: want{summary: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_FALSE/GatewayNotProgrammed"},
				Resources:  readiness(),
				XRReady:    "READY_FALSE",
			}, message: []string{`the Gateway "inference-gateway" in "modelplane-system" has not been observed`, "Also:", "anchor", "Envoy Deployment"}},
		},
		"ObjectsCreatedNotReported": {
			reason: "The Objects exist but the provider has not reported on them.",
			req: newRequest(t, gatewayXR(nil), map[string]obj{
				"gateway": object("gateway", nil, false, false), "anchor-route": object("anchor-route", nil, false, false), "envoy-deployment": object("envoy-deployment", nil, false, false),
			}, nil),
			want: want{summary: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_FALSE/GatewayNotProgrammed"},
				Resources:  readiness(),
				XRReady:    "READY_FALSE",
			}, message: []string{"has not reported yet"}},
		},
		"GatewayWithoutAddress": {
			reason: "The Gateway is observed but Envoy Gateway has not given it an address.",
			req:    newRequest(t, gatewayXR(nil), observedGateway("", true, rolled, true), nil),
			want: want{summary: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_FALSE/GatewayNotProgrammed"},
				Resources:  readiness(append(frontDoor(), "gateway-namespace", "gateway-status", "envoy-proxy", "failover-policy", "client-policy", "anchor-route", "envoy-deployment")...),
				XRReady:    "READY_FALSE",
			}, message: []string{"has no address yet"}},
		},
		"AnchorNotAccepted": {
			reason: "The Gateway has an address but AI Gateway has not accepted the anchor.",
			req:    newRequest(t, gatewayXR(nil), observedGateway("203.0.113.10", false, rolled, true), nil),
			want: want{summary: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_FALSE/AnchorNotAccepted"},
				Resources:  readiness(append(frontDoor(), "gateway-namespace", "gateway-status", "envoy-proxy", "failover-policy", "client-policy", "gateway", "envoy-deployment")...),
				XRReady:    "READY_FALSE",
			}, message: []string{`anchor AIGatewayRoute "inference-gateway-anchor"`}},
		},
		"DeploymentNotReported": {
			reason: "Gateway and anchor are fine, the Deployment Object has not reported.",
			req: func() *fnv1.RunFunctionRequest {
				o := observedGateway("203.0.113.10", true, nil, true)
				return newRequest(t, gatewayXR(nil), o, nil)
			}(),
			want: want{summary: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_FALSE/DeploymentNotObserved"},
				Resources:  readiness(append(frontDoor(), "gateway-namespace", "gateway-status", "envoy-proxy", "failover-policy", "client-policy", "gateway", "anchor-route")...),
				XRReady:    "READY_FALSE",
			}, message: []string{`Envoy Deployment "envoy-modelplane-system-inference-gateway" in "envoy-gateway-system" has not been observed`}},
		},
		"DeploymentGoneStaleManifest": {
			reason: "The Deployment was deleted: the Object is Synced=False but keeps its old manifest and Ready=True. Stale evidence is not evidence.",
			req:    newRequest(t, gatewayXR(nil), observedGateway("203.0.113.10", true, rolled, false), nil),
			want: want{summary: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_FALSE/DeploymentNotObserved"},
				Resources:  readiness(append(frontDoor(), "gateway-namespace", "gateway-status", "envoy-proxy", "failover-policy", "client-policy", "gateway", "anchor-route")...),
				XRReady:    "READY_FALSE",
			}, message: []string{"external resource does not exist"}},
		},
		"TrafficPolicyNotAccepted": {
			reason: "Envoy Gateway refuses the BackendTrafficPolicy (here its global rate limits, with rate limiting off in its config) and answers 500 on every route: GatewayReady says so, quoting Envoy Gateway.",
			req: func() *fnv1.RunFunctionRequest {
				o := observedGateway("203.0.113.10", true, rolled, true)
				o["failover-policy"] = object("failover-policy", refusedPolicyManifest("BackendTrafficPolicy", rateLimitDisabled), true, false)
				return newRequest(t, gatewayXR(nil), o, nil)
			}(),
			want: want{summary: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_FALSE/TrafficPolicyNotAccepted"},
				Resources:  readiness(append(frontDoor(), "gateway-namespace", "gateway-status", "envoy-proxy", "client-policy", "gateway", "anchor-route", "envoy-deployment")...),
				XRReady:    "READY_FALSE",
			}, message: []string{`Envoy Gateway has not accepted the BackendTrafficPolicy "inference-gateway-failover" for the Gateway "inference-gateway"; while it is refused, Envoy answers 500 on every route of the Gateway, /healthz included: ` + rateLimitDisabled}},
		},
		"TrafficPolicyNotObserved": {
			reason: "The BackendTrafficPolicy's Object has not reported yet: nothing says Envoy Gateway accepted it.",
			req: func() *fnv1.RunFunctionRequest {
				o := observedGateway("203.0.113.10", true, rolled, true)
				o["failover-policy"] = object("failover-policy", nil, false, false)
				return newRequest(t, gatewayXR(nil), o, nil)
			}(),
			want: want{summary: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_FALSE/TrafficPolicyNotAccepted"},
				Resources:  readiness(append(frontDoor(), "gateway-namespace", "gateway-status", "envoy-proxy", "client-policy", "gateway", "anchor-route", "envoy-deployment")...),
				XRReady:    "READY_FALSE",
			}, message: []string{`the BackendTrafficPolicy "inference-gateway-failover" has not been observed yet (the Object has not reported yet)`}},
		},
		"RolloutComplete": {
			reason: "Everything observed and rolled out: GatewayReady True, every resource ready.",
			req:    newRequest(t, gatewayXR(nil), observedGateway("203.0.113.10", true, rolled, true), nil),
			want: want{summary: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_TRUE/Serving"},
				Resources:  readiness(allGateway...),
				XRReady:    "READY_UNSPECIFIED",
			}, message: []string{"2 of 2 replicas run the current template, 2 available"}},
		},
		"RollingUpdateOldPods": {
			reason: "A surge pod of the new template and two old pods: GatewayReady False, and the message shows the counters.",
			req:    newRequest(t, gatewayXR(nil), observedGateway("203.0.113.10", true, deploymentManifest(3, 3, true, 3, 1, 2), true), nil),
			want: want{summary: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_FALSE/OldReplicasPresent"},
				Resources:  readiness(append(frontDoor(), "gateway-namespace", "gateway-status", "envoy-proxy", "failover-policy", "client-policy", "gateway", "anchor-route")...),
				XRReady:    "READY_FALSE",
			}, message: []string{"1 of 3 replicas run the current template"}},
		},
		"EvictionReplacementPending": {
			reason: "One of two pods evicted, its replacement pending under the PDB: GatewayReady stays True.",
			req:    newRequest(t, gatewayXR(nil), observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 1), true), nil),
			want: want{summary: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_TRUE/Serving"},
				Resources:  readiness(allGateway...),
				XRReady:    "READY_UNSPECIFIED",
			}, message: []string{"1 available"}},
		},
		"ScaledToZero": {
			reason: "spec.replicas 0: nothing can serve.",
			req:    newRequest(t, gatewayXR(obj{"providerConfigName": "gpu-cluster-1", "replicas": 0}), observedGateway("203.0.113.10", true, deploymentManifest(3, 3, true, 0, 0, 0), true), nil),
			want: want{summary: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_FALSE/NoReplicaAvailable"},
				Resources:  readiness(append(frontDoor(), "gateway-namespace", "gateway-status", "envoy-proxy", "failover-policy", "client-policy", "gateway", "anchor-route")...),
				XRReady:    "READY_FALSE",
			}, message: []string{"0 of 0 replicas are available"}},
		},
		"MarkerMissing": {
			reason: "AI Gateway has not put its marker on the template.",
			req:    newRequest(t, gatewayXR(nil), observedGateway("203.0.113.10", true, deploymentManifest(1, 1, false, 2, 2, 2), true), nil),
			want: want{summary: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_FALSE/ExtProcMarkerMissing"},
				Resources:  readiness(append(frontDoor(), "gateway-namespace", "gateway-status", "envoy-proxy", "failover-policy", "client-policy", "gateway", "anchor-route")...),
				XRReady:    "READY_FALSE",
			}, message: []string{"aigateway.envoyproxy.io/extproc-config-hash"}},
		},
		"GenerationLagging": {
			reason: "The controller has not observed the latest template yet; its counters are stale.",
			req:    newRequest(t, gatewayXR(nil), observedGateway("203.0.113.10", true, deploymentManifest(4, 3, true, 2, 2, 2), true), nil),
			want: want{summary: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_FALSE/GenerationNotObserved"},
				Resources:  readiness(append(frontDoor(), "gateway-namespace", "gateway-status", "envoy-proxy", "failover-policy", "client-policy", "gateway", "anchor-route")...),
				XRReady:    "READY_FALSE",
			}, message: []string{"generation 4", "observedGeneration 3"}},
		},
		"TLSRolledOut": {
			reason: "A TLS gateway whose certificate reached the gateway cluster reaches GatewayReady like a plain one.",
			req:    newRequest(t, gatewayXR(tlsSpec), observedTLSGateway(true), map[string][]obj{"tls-secret-llm-tls": {tlsSecret(true, true)}}),
			want: want{summary: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_TRUE/Serving"},
				Resources:  readiness(append(allGateway, "https-redirect-route", "tls-secret-llm-tls")...),
				XRReady:    "READY_UNSPECIFIED",
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, tc.req)
			// Every gateway here is open, and says so (gateway_auth_test.go
			// covers gateways with caller auth).
			tc.want.summary.Results = append(tc.want.summary.Results, openResult)
			if diff := cmp.Diff(tc.want.summary, summarize(rsp), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nRunFunction(...): -want, +got:\n%s", tc.reason, diff)
			}
			msg := condition(rsp, "GatewayReady").GetMessage()
			for _, m := range tc.want.message {
				if !strings.Contains(msg, m) {
					t.Errorf("%s\nGatewayReady message %q does not contain %q", tc.reason, msg, m)
				}
			}
		})
	}
}

func TestGatewayManifests(t *testing.T) {
	cases := map[string]struct {
		reason    string
		spec      obj
		listeners []any
	}{
		"Plain": {
			reason: "Without TLS the Gateway has one http listener on 80.",
			spec:   nil,
			listeners: []any{
				obj{"name": "http", "port": 80.0, "protocol": "HTTP", "allowedRoutes": obj{"namespaces": obj{"from": "Selector", "selector": obj{"matchExpressions": []any{obj{"key": names.TeamNamespaceLabel, "operator": "Exists"}}}}}},
			},
		},
		"TLS": {
			reason: "With TLS an https listener on 443 terminates TLS for the hostname.",
			spec:   tlsSpec,
			listeners: []any{
				obj{"name": "http", "port": 80.0, "protocol": "HTTP", "allowedRoutes": obj{"namespaces": obj{"from": "Selector", "selector": obj{"matchExpressions": []any{obj{"key": names.FrontDoorLabel, "operator": "Exists"}}}}}},
				obj{"name": "https", "port": 443.0, "protocol": "HTTPS", "hostname": "llm.example.com",
					"tls": obj{"mode": "Terminate", "certificateRefs": []any{obj{"name": "llm-tls"}}},
					"allowedRoutes": obj{"namespaces": obj{"from": "Selector", "selector": obj{"matchExpressions": []any{
						obj{"key": names.TeamNamespaceLabel, "operator": "Exists"},
					}}}}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, newRequest(t, gatewayXR(tc.spec), nil, nil))
			spec, _ := manifest(rsp, "gateway")["spec"].(obj)
			if diff := cmp.Diff(tc.listeners, spec["listeners"]); diff != "" {
				t.Errorf("%s\nlisteners: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}

	rsp := run(t, newRequest(t, gatewayXR(nil), nil, nil))
	ep := manifest(rsp, "envoy-proxy")
	wantEP := obj{"type": "Kubernetes", "kubernetes": obj{
		"envoyDeployment": obj{"name": "envoy-modelplane-system-inference-gateway", "replicas": 2.0, "patch": obj{"type": "StrategicMerge", "value": obj{"spec": obj{"template": obj{"spec": obj{"dnsConfig": obj{"options": []any{obj{"name": "ndots", "value": "1"}}}}}}}}},
		"envoyPDB":        obj{"maxUnavailable": 1.0},
	}}
	if mt := ep["spec"].(obj)["mergeType"]; mt != "StrategicMerge" {
		t.Errorf("EnvoyProxy mergeType is %v; want StrategicMerge, so the GatewayClass's EnvoyProxy is merged, not replaced", mt)
	}
	// The pod settings are TestGatewayBuilders' and TestEnvoySettings'.
	delete(ep["spec"].(obj)["provider"].(obj)["kubernetes"].(obj)["envoyDeployment"].(obj), "pod")
	if diff := cmp.Diff(wantEP, ep["spec"].(obj)["provider"]); diff != "" {
		t.Errorf("EnvoyProxy provider: -want, +got:\n%s", diff)
	}
	dep := rsp.GetDesired().GetResources()["envoy-deployment"].GetResource().AsMap()
	wantDep := obj{
		"managementPolicies": []any{"Observe"},
		"watch":              true,
		"forProvider":        obj{"manifest": obj{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": obj{"name": "envoy-modelplane-system-inference-gateway", "namespace": "envoy-gateway-system"}}},
		"providerConfigRef":  obj{"kind": "ClusterProviderConfig", "name": "gpu-cluster-1"},
	}
	got := dep["spec"].(obj)
	delete(got, "readiness")
	if diff := cmp.Diff(wantDep, got); diff != "" {
		t.Errorf("envoy-deployment Object: -want, +got:\n%s", diff)
	}
	if ns := dep["metadata"].(obj)["namespace"]; ns != "modelplane-system" {
		t.Errorf("a cluster-scoped composite's Object must name its control-plane namespace; got %v", ns)
	}
}

func TestRunFunctionFatal(t *testing.T) {
	previous := &fnv1.State{Resources: map[string]*fnv1.Resource{
		"gateway": {Resource: mustStruct(t, obj{"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "Object"})},
	}}
	badObserved := object("gateway", gatewayManifest("203.0.113.10"), true, true)
	badObserved["status"].(obj)["conditions"] = "not-a-list"
	badDeployment := deploymentManifest(2, 2, true, 2, 2, 2)
	badDeployment["status"].(obj)["replicas"] = "two"
	cases := map[string]struct {
		reason string
		req    *fnv1.RunFunctionRequest
		want   string
	}{
		"UnknownKind": {
			reason: "Any other kind is Fatal, naming the kind it got and the kinds it supports.",
			req:    newRequest(t, obj{"apiVersion": "example.org/v1", "kind": "Database", "metadata": obj{"name": "db"}}, nil, nil),
			want:   `cannot compose a composite of kind "Database": this function composes InferenceGateway and ModelRoute`,
		},
		"NoProviderConfigName": {
			reason: "A missing providerConfigName is Fatal and says how to fix it.",
			req:    newRequest(t, gatewayXR(obj{"replicas": 2}), nil, nil),
			want:   "cannot compose InferenceGateway: spec.providerConfigName is required; set it to the provider-kubernetes ClusterProviderConfig that reaches the gateway's cluster",
		},
		"ReplicasWrongType": {
			reason: "A wrong field type is Fatal and names the field.",
			req:    newRequest(t, gatewayXR(obj{"providerConfigName": "p", "replicas": "two"}), nil, nil),
			want:   "cannot read InferenceGateway: spec.replicas is a JSON string, but must be a whole number; fix spec.replicas",
		},
		"ReplicasFraction": {
			reason: "A fraction is not a replica count.",
			req:    newRequest(t, gatewayXR(obj{"providerConfigName": "p", "replicas": 1.5}), nil, nil),
			want:   "cannot read InferenceGateway: spec.replicas is a JSON number 1.5, but must be a whole number; fix spec.replicas",
		},
		"TLSWithoutHostname": {
			reason: "TLS needs a hostname.",
			req:    newRequest(t, gatewayXR(obj{"providerConfigName": "p", "tls": obj{"certificateRefs": []any{obj{"name": "c"}}}}), nil, nil),
			want:   "cannot compose InferenceGateway: spec.tls needs spec.hostname; set the hostname the certificate is for",
		},
		"BudgetsWithoutAuth": {
			reason: "Budgets are kept per authenticated caller: without auth there is none, and a client could claim any name.",
			req:    newRequest(t, gatewayXR(obj{"providerConfigName": "p", "budgets": []any{obj{"tokens": "Total", "limit": 1000, "per": "Day"}}}), nil, nil),
			want:   "cannot compose InferenceGateway: spec.budgets needs spec.auth, since budgets are kept per authenticated caller; set spec.auth.apiKey.secretSelector, or remove spec.budgets",
		},
		"BufferLimitTooSmall": {
			reason: "A buffer limit under Envoy Gateway's own default only breaks requests.",
			req:    newRequest(t, gatewayXR(obj{"providerConfigName": "p", "connection": obj{"bufferLimit": "1Ki"}}), nil, nil),
			want:   "cannot compose InferenceGateway: spec.connection.bufferLimit 1Ki is out of range; set a size from 32Ki to 4095Mi, such as the default 50Mi",
		},
		"BufferLimitTooLarge": {
			reason: "Envoy Gateway rejects a limit that does not fit in 32 bits, and with it the whole ClientTrafficPolicy.",
			req:    newRequest(t, gatewayXR(obj{"providerConfigName": "p", "connection": obj{"bufferLimit": "4Gi"}}), nil, nil),
			want:   "cannot compose InferenceGateway: spec.connection.bufferLimit 4Gi is out of range; set a size from 32Ki to 4095Mi, such as the default 50Mi",
		},
		"BufferLimitNotAQuantity": {
			reason: "A limit that is no quantity names the field.",
			req:    newRequest(t, gatewayXR(obj{"providerConfigName": "p", "connection": obj{"bufferLimit": "lots"}}), nil, nil),
			want:   "cannot read InferenceGateway: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
		},
		"UnknownRetryTrigger": {
			reason: "A trigger Envoy Gateway does not know is named with the ones it does.",
			req:    newRequest(t, gatewayXR(obj{"providerConfigName": "p", "failover": obj{"retryOn": obj{"triggers": []any{"connect-failure", "on-429"}}}}), nil, nil),
			want:   `cannot compose InferenceGateway: spec.failover.retryOn.triggers[1] "on-429" is not a trigger Envoy Gateway knows; use one of [5xx gateway-error reset reset-before-request connect-failure retriable-4xx refused-stream retriable-status-codes cancelled deadline-exceeded internal resource-exhausted unavailable]`,
		},
		"BadRetryStatus": {
			reason: "A status code outside 100-599 names its index.",
			req:    newRequest(t, gatewayXR(obj{"providerConfigName": "p", "failover": obj{"retryOn": obj{"httpStatusCodes": []any{429, 700}}}}), nil, nil),
			want:   "cannot compose InferenceGateway: spec.failover.retryOn.httpStatusCodes[1] is 700; use an HTTP status from 100 to 599, such as 429 or 503",
		},
		"BadPanicThreshold": {
			reason: "The panic threshold is a percentage.",
			req:    newRequest(t, gatewayXR(obj{"providerConfigName": "p", "failover": obj{"panicThreshold": 101}}), nil, nil),
			want:   "cannot compose InferenceGateway: spec.failover.panicThreshold is 101; set a percentage from 0 to 100",
		},
		"MalformedObservedObject": {
			reason: "A malformed observed Object is Fatal, naming it.",
			req:    newRequest(t, gatewayXR(nil), map[string]obj{"gateway": badObserved}, nil),
			want:   `cannot read the observed composed resource "gateway": status.conditions is a string, not a list`,
		},
		"MalformedObservedObjects": {
			reason: "Of several malformed observed Objects, the first by name is named, on every reconcile alike.",
			req:    newRequest(t, gatewayXR(nil), map[string]obj{"gateway": badObserved, "anchor-route": badObserved, "gateway-status": badObserved, "envoy-proxy": badObserved}, nil),
			want:   `cannot read the observed composed resource "anchor-route": status.conditions is a string, not a list`,
		},
		"MalformedDeployment": {
			reason: "A Deployment whose counters are not numbers is Fatal, naming the field.",
			req:    newRequest(t, gatewayXR(nil), observedGateway("203.0.113.10", true, badDeployment, true), nil),
			want:   `cannot read the observed Envoy Deployment "envoy-modelplane-system-inference-gateway": status.replicas is a JSON string, but must be a whole number`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.req.Desired = previous
			rsp := run(t, tc.req)
			want := &fnv1.RunFunctionResponse{
				Meta:    &fnv1.ResponseMeta{Tag: "test", Ttl: rsp.GetMeta().GetTtl()},
				Desired: previous,
				Results: []*fnv1.Result{{Severity: fnv1.Severity_SEVERITY_FATAL, Message: tc.want, Target: fnv1.Target_TARGET_COMPOSITE.Enum()}},
			}
			// Fatal passes the desired state through untouched, and
			// Crossplane applies and deletes nothing after a Fatal result.
			if diff := cmp.Diff(want, rsp, protocmp.Transform()); diff != "" {
				t.Errorf("%s\nRunFunction(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestGatewayStatus(t *testing.T) {
	cases := map[string]struct {
		reason string
		spec   obj
		dep    obj
		want   obj
	}{
		"Plain": {
			reason: "Without a hostname the endpoints use the address over http; counters come from the Deployment; the gateway records its claim on its cluster.",
			dep:    deploymentManifest(3, 3, true, 3, 1, 2),
			want: obj{"address": "203.0.113.10", "auth": obj{"method": "None"}, "clusterGateway": "inference-gateway",
				"endpoints": obj{"openAI": "http://203.0.113.10/v1", "anthropic": "http://203.0.113.10/anthropic"},
				"rollout":   obj{"generation": 3.0, "observedGeneration": 3.0, "replicas": 3.0, "updatedReplicas": 1.0, "availableReplicas": 2.0}},
		},
		"TLS": {
			reason: "With TLS the endpoints use https and the hostname.",
			spec:   tlsSpec,
			dep:    deploymentManifest(2, 2, true, 2, 2, 2),
			want: obj{"address": "203.0.113.10", "auth": obj{"method": "None"}, "clusterGateway": "inference-gateway",
				"endpoints": obj{"openAI": "https://llm.example.com/v1", "anthropic": "https://llm.example.com/anthropic"},
				"rollout":   obj{"generation": 2.0, "observedGeneration": 2.0, "replicas": 2.0, "updatedReplicas": 2.0, "availableReplicas": 2.0}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, newRequest(t, gatewayXR(tc.spec), observedGateway("203.0.113.10", true, tc.dep, true), nil))
			st := status(rsp)
			// The not-ready spell is TestNotReadySpell's.
			delete(st, "notReadySince")
			if diff := cmp.Diff(tc.want, st); diff != "" {
				t.Errorf("%s\nstatus: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestInputCustomizes checks the Input reaches every place it should: the
// gateway namespace and the control-plane namespace are separate settings,
// and the marker keys reach the celQuery the function also evaluates.
func TestInputCustomizes(t *testing.T) {
	req := newRequest(t, gatewayXR(nil), nil, nil)
	req.Input = mustStruct(t, obj{
		"apiVersion": "inferencegateway.fn.crossplane.io/v1beta1", "kind": "Input",
		"gatewayNamespace": "ai-gw", "gatewayName": "edge", "objectNamespace": "platform",
		"gatewayClassName": "eg", "envoyGatewayNamespace": "eg-system",
		"extProcMarkerAnnotations": []any{"example.org/sidecar-hash"},
	})
	rsp := run(t, req)
	for _, n := range allGateway {
		o := rsp.GetDesired().GetResources()[n].GetResource().AsMap()
		if ns := o["metadata"].(obj)["namespace"]; ns != "platform" {
			t.Errorf("%s: Object namespace = %v, want the Input's objectNamespace platform", n, ns)
		}
	}
	if md := manifest(rsp, "gateway")["metadata"].(obj); md["namespace"] != "ai-gw" || md["name"] != "edge" {
		t.Errorf("Gateway metadata = %v, want edge in ai-gw", md)
	}
	if c := manifest(rsp, "gateway")["spec"].(obj)["gatewayClassName"]; c != "eg" {
		t.Errorf("gatewayClassName = %v, want eg", c)
	}
	dep := manifest(rsp, "envoy-deployment")["metadata"].(obj)
	if dep["name"] != "envoy-ai-gw-edge" || dep["namespace"] != "eg-system" {
		t.Errorf("Envoy Deployment = %v, want envoy-ai-gw-edge in eg-system", dep)
	}
	q := rsp.GetDesired().GetResources()["envoy-deployment"].GetResource().AsMap()["spec"].(obj)["readiness"].(obj)["celQuery"].(string)
	if !strings.Contains(q, "'example.org/sidecar-hash'") || strings.Contains(q, "extproc-config-hash") {
		t.Errorf("celQuery does not use the Input's marker keys: %s", q)
	}

	t.Run("BadMarkerKey", func(t *testing.T) {
		req := newRequest(t, gatewayXR(nil), nil, nil)
		req.Input = mustStruct(t, obj{"apiVersion": "inferencegateway.fn.crossplane.io/v1beta1", "kind": "Input", "extProcMarkerAnnotations": []any{"bad key'"}})
		rs := run(t, req).GetResults()
		if len(rs) != 1 || rs[0].GetSeverity() != fnv1.Severity_SEVERITY_FATAL || !strings.Contains(rs[0].GetMessage(), `cannot use the function Input: extProcMarkerAnnotations[0] "bad key'" is not an annotation key`) {
			t.Errorf("want a Fatal naming the bad marker key, got %v", rs)
		}
	})
}

// TestInputRefused: an Input the function cannot use is Fatal with a
// message that names the field and reads the same on every call, whatever
// order Go's maps meet several bad fields in.
func TestInputRefused(t *testing.T) {
	cases := map[string]struct {
		input obj
		want  string
	}{
		"WrongTypes": {
			input: obj{"gatewayName": 5.0, "gatewayNamespace": true, "clusterDomain": []any{"x"}, "objectNamespace": obj{}},
			want:  "cannot read the function Input: input.clusterDomain is a JSON array, but must be a string; fix input.clusterDomain",
		},
		"UnknownField": {
			input: obj{"gatewayNamespaces": "a", "zone": "b"},
			want:  "cannot read the function Input: input.gatewayNamespaces is not a field of the function Input; remove it, or check its spelling against its schema",
		},
		"NotALabel": {
			input: obj{"gatewayName": "Edge Gateway"},
			want:  `cannot use the function Input: gatewayName "Edge Gateway" is not a DNS label`,
		},
		"AnchorIsModelHeader": {
			input: obj{"anchorHeader": obj{"name": "x-ai-eg-model", "value": "true"}},
			want:  `cannot use the function Input: anchorHeader.name "x-ai-eg-model" is the header AI Gateway routes models on`,
		},
		"NegativeCooldown": {
			input: obj{"circuitBreakerCooldown": "-1m"},
			want:  "cannot use the function Input: circuitBreakerCooldown -1m0s is negative",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := obj{"apiVersion": "inferencegateway.fn.crossplane.io/v1beta1", "kind": "Input", "metadata": obj{"name": "x"}}
			maps.Copy(in, tc.input)
			var first string
			for i := range 20 {
				req := newRequest(t, gatewayXR(nil), nil, nil)
				req.Input = mustStruct(t, in)
				rs := run(t, req).GetResults()
				if len(rs) != 1 || rs[0].GetSeverity() != fnv1.Severity_SEVERITY_FATAL {
					t.Fatalf("want one Fatal, got %v", rs)
				}
				msg := rs[0].GetMessage()
				if i == 0 {
					first = msg
				}
				if msg != first {
					t.Fatalf("call %d says %q, call 0 said %q", i, msg, first)
				}
			}
			if !strings.HasPrefix(first, tc.want) {
				t.Errorf("Fatal %q, want it to start %q", first, tc.want)
			}
		})
	}
}

// TestVerdictObjectsAreWatched: every Object whose Ready waits on a
// controller's verdict is watched, since provider-kubernetes re-reads an
// Object that is not Ready only every 30 s, and the controllers give their
// verdict after its first read. Objects whose Ready is their existence
// need no watch.
func TestVerdictObjectsAreWatched(t *testing.T) {
	rsp := run(t, newRequest(t, gatewayXR(nil), nil, nil))
	cases := map[string]struct {
		reason string
		want   bool
	}{
		"gateway":          {reason: "Ready waits on Envoy Gateway's address", want: true},
		"anchor-route":     {reason: "Ready waits on AI Gateway's Accepted", want: true},
		"client-policy":    {reason: "Ready waits on Envoy Gateway's Accepted", want: true},
		"failover-policy":  {reason: "Ready waits on Envoy Gateway's Accepted", want: true},
		"envoy-deployment": {reason: "Ready waits on the Deployment controller's rollout", want: true},
		"gateway-status":   {reason: "the ModelRoutes watch it; the gateway only writes it", want: false},
		"envoy-proxy":      {reason: "Ready is its existence", want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := rsp.GetDesired().GetResources()[name]
			if r == nil {
				t.Fatalf("%s: not composed", tc.reason)
			}
			got, _ := r.GetResource().AsMap()["spec"].(obj)["watch"].(bool)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: spec.watch -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestGatewaySpecRefusedThenFixed follows a serving gateway through a
// refused spec and back, reconcile by reconcile as provider-kubernetes
// would apply each answer: the refused spec keeps every Object as it was
// (but the gateway-status ConfigMap, which says SpecRefused), and the
// fixed spec is GatewayReady True again at its first reconcile, with the
// same Objects: nothing deleted, nothing new.
func TestGatewaySpecRefusedThenFixed(t *testing.T) {
	good := obj{"providerConfigName": "gpu-cluster-1", "replicas": 2}
	bad := obj{"providerConfigName": "gpu-cluster-1", "replicas": 2, "failover": obj{"numRetries": 11}}
	observed := observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true)
	settleAll := func(rsp *fnv1.RunFunctionResponse) {
		for n := range rsp.GetDesired().GetResources() {
			o := applyDesired(t, observed[n], rsp, n)
			live := observed[n]["status"].(obj)["atProvider"]
			o = providerSyncs(t, o)
			if n == "envoy-deployment" || n == "gateway" || n == "anchor-route" || strings.HasSuffix(n, "-policy") {
				// Keep what the controllers report; the provider only
				// re-read it.
				o["status"].(obj)["atProvider"] = live
			}
			observed[n] = o
		}
	}
	rsp := run(t, newRequest(t, gatewayXR(good), observed, nil))
	if c := condition(rsp, "GatewayReady"); c.GetReason() != "Serving" {
		t.Fatalf("before: GatewayReady %s: %s", c.GetReason(), c.GetMessage())
	}
	settleAll(rsp)
	before := slices.Sorted(maps.Keys(rsp.GetDesired().GetResources()))

	req := newRequest(t, gatewayXR(bad), observed, nil)
	rsp = run(t, req)
	expectRefused(t, req, rsp, "GatewayReady", "spec.failover.numRetries is 11")
	settleAll(rsp)

	rsp = run(t, newRequest(t, gatewayXR(good), observed, nil))
	if c := condition(rsp, "GatewayReady"); c.GetReason() != "Serving" {
		t.Errorf("fixed: GatewayReady %s: %s", c.GetReason(), c.GetMessage())
	}
	if diff := cmp.Diff(before, slices.Sorted(maps.Keys(rsp.GetDesired().GetResources()))); diff != "" {
		t.Errorf("fixed: the desired Objects are not those before the refusal: -before, +fixed:\n%s", diff)
	}
	if data := manifest(rsp, "gateway-status")["data"].(obj); data["gatewayReady"] != "True" || data["reason"] != "Serving" {
		t.Errorf("fixed: the gateway-status ConfigMap says %v", data)
	}
}
