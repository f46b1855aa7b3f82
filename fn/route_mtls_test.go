package fn

import (
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// caPEM stands for a backend's CA certificate: public, so the function may
// copy it itself from a ConfigMap.
const caPEM = "-----BEGIN CERTIFICATE-----\nMIIBZzCCAQ2gAwIBAgIBATAKBggqhkjOPQQDAjAaMRgwFgYDVQQDEw90ZXN0IGJh\nY2tlbmQgQ0EwIBcNMjYwMTAxMDAwMDAwWhgPMjEyNjAxMDEwMDAwMDBaMBoxGDAW\nBgNVBAMTD3Rlc3QgYmFja2VuZCBDQTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IA\nBLomZPIg1CzxqimssuVCStyxcjCcEEguzEHLnPsTMBNjhhZvWFFPsFPdP4rOmhmz\nuEcYOxwb6dYIueogHJDD/qmjQjBAMA4GA1UdDwEB/wQEAwIChDAPBgNVHRMBAf8E\nBTADAQH/MB0GA1UdDgQWBBSoSLFEYrlcjgpKgCw351tRVa/PtjAKBggqhkjOPQQD\nAgNIADBFAiBwBFShDEMC+6JQBxYUhvN9vQOPFes+SmyYh/57CDwjxQIhANXIjDqS\npBF3BBxUZUtNCasH7w3CIUYSOY6rX/lEvmsB\n-----END CERTIFICATE-----\n"

// caPEMBase64 is a CA Secret's ca.crt, as the API server serves it.
const caPEMBase64 = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJaekNDQVEyZ0F3SUJBZ0lCQVRBS0JnZ3Foa2pPUFFRREFqQWFNUmd3RmdZRFZRUURFdzkwWlhOMElHSmgKWTJ0bGJtUWdRMEV3SUJjTk1qWXdNVEF4TURBd01EQXdXaGdQTWpFeU5qQXhNREV3TURBd01EQmFNQm94R0RBVwpCZ05WQkFNVEQzUmxjM1FnWW1GamEyVnVaQ0JEUVRCWk1CTUdCeXFHU000OUFnRUdDQ3FHU000OUF3RUhBMElBCkJMb21aUElnMUN6eHFpbXNzdVZDU3R5eGNqQ2NFRWd1ekVITG5Qc1RNQk5qaGhadldGRlBzRlBkUDRyT21obXoKdUVjWU94d2I2ZFlJdWVvZ0hKREQvcW1qUWpCQU1BNEdBMVVkRHdFQi93UUVBd0lDaERBUEJnTlZIUk1CQWY4RQpCVEFEQVFIL01CMEdBMVVkRGdRV0JCU29TTEZFWXJsY2pncEtnQ3czNTF0UlZhL1B0akFLQmdncWhrak9QUVFECkFnTklBREJGQWlCd0JGU2hERU1DKzZKUUJ4WVVodk45dlFPUEZlcytTbXlZaC81N0NEd2p4UUloQU5YSWpEcVMKcEJGM0JCeFVaVXROQ2FzSDd3M0NJVVlTT1k2clgvbEV2bXNCCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"

// mtlsBackend is backend m, in-cluster, verified by its own CA (kind
// ConfigMap or Secret, named m-ca) and, with clientCert, requiring the
// gateway's client certificate.
func mtlsBackend(kind string, clientCert bool) obj {
	b := backend("m", 0, 1, "")
	b["endpoint"] = obj{"hostname": "vllm.models.svc.cluster.local", "port": 8443,
		"tlsConfig": obj{"caRef": obj{"kind": kind, "name": "m-ca"}, "clientCertificate": clientCert}}
	return b
}

// caConfigMap and caSecret are the ModelRoute's CA objects m-ca.
func caConfigMap() obj {
	return obj{"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj{"name": "m-ca", "namespace": "ml-team", "resourceVersion": "5"}, "data": obj{"ca.crt": caPEM}}
}

func caSecret() obj {
	s := secret("m-ca", obj{"ca.crt": caPEMBase64})
	s["metadata"].(obj)["resourceVersion"] = "5"
	return s
}

// gwClientCert is a ready InferenceGateway with a client certificate.
var gwClientCert = func() []obj {
	g := inferenceGateway(true, "Serving", false)
	g["spec"] = obj{"providerConfigName": "gpu-cluster-1", "backendTLS": obj{"clientCertificate": obj{"issuerRef": obj{"name": "corp-ca", "kind": "ClusterIssuer"}}}}
	return []obj{g}
}()

// mtlsObserved is the observed state of a route serving b, with m's
// Backend and AIServiceBackend on the gateway cluster, and m's CA copy
// (nil: none) there too.
func mtlsObserved(ca obj) map[string]obj {
	o := observedRoute(true)
	o["route"] = routedObject(true, "qwen-b")
	for _, n := range []string{"backend-a", "aibackend-a", "credential-a", "credpolicy-a"} {
		delete(o, n)
	}
	maps.Copy(o, placed("m"))
	if ca != nil {
		o["ca-m"] = ca
	}
	return o
}

// TestModelRouteMTLS covers a backend verified by its own CA that may
// require the gateway's client certificate: it joins the route once its
// CA is on the gateway cluster; with its CA missing, or a gateway without a
// client certificate, it is left out with a Warning and the other backend
// serves.
func TestModelRouteMTLS(t *testing.T) {
	caCopy := object("ca-m", plainManifest("ConfigMap"), true, true)
	type want struct {
		condition, message string
		refs               []string
		warning            string
		// caCopy: ca-m is desired.
		caCopy bool
	}
	cases := map[string]struct {
		reason   string
		backend  obj
		gateway  []obj
		observed map[string]obj
		required map[string][]obj
		want     want
	}{
		"Delivered": {
			reason:   "The CA copy is on the gateway cluster and the gateway has a client certificate: m joins the route.",
			backend:  mtlsBackend("ConfigMap", true),
			gateway:  gwClientCert,
			observed: mtlsObserved(caCopy),
			required: map[string][]obj{"ca-configmap-m-ca": {caConfigMap()}},
			want:     want{condition: "RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted", refs: []string{"qwen-m:0:1", "qwen-b:0:1"}, caCopy: true},
		},
		"CANotDeliveredYet": {
			reason:   "The CA copy is not on the gateway cluster yet: m waits, b serves.",
			backend:  mtlsBackend("ConfigMap", true),
			gateway:  gwClientCert,
			observed: mtlsObserved(nil),
			required: map[string][]obj{"ca-configmap-m-ca": {caConfigMap()}},
			want: want{condition: "RoutingReady=STATUS_CONDITION_FALSE/WaitingForCredentials", message: "the CA certificates of backends m have not reached the gateway cluster yet",
				refs: []string{"qwen-b:0:1"}, caCopy: true},
		},
		"CAMissing": {
			reason:   "The CA ConfigMap is missing: m is left out with a Warning naming it, b serves, and the copy composed before is carried forward.",
			backend:  mtlsBackend("ConfigMap", false),
			gateway:  gwReady,
			observed: mtlsObserved(caCopy),
			required: map[string][]obj{"ca-configmap-m-ca": {}},
			want: want{condition: "RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted", refs: []string{"qwen-b:0:1"}, caCopy: true,
				warning: `backend "m" is left out of the route: its CA ConfigMap "m-ca" does not exist in the ModelRoute's namespace`},
		},
		"CAWithoutKey": {
			reason:   "The CA Secret has no ca.crt: m is left out with a Warning.",
			backend:  mtlsBackend("Secret", false),
			gateway:  gwReady,
			observed: mtlsObserved(nil),
			required: map[string][]obj{"ca-secret-m-ca": {secret("m-ca", obj{"tls.crt": caPEMBase64})}},
			want: want{condition: "RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted", refs: []string{"qwen-b:0:1"},
				warning: `backend "m" is left out of the route: its CA Secret "m-ca" has no key "ca.crt"`},
		},
		"CAConfigMapBundlesAKey": {
			reason:   "The CA ConfigMap's ca.crt bundles a private key: m is left out with a Warning that names the ConfigMap and not the key, and nothing of it is copied.",
			backend:  mtlsBackend("ConfigMap", false),
			gateway:  gwReady,
			observed: mtlsObserved(nil),
			required: map[string][]obj{"ca-configmap-m-ca": {func() obj {
				c := caConfigMap()
				c["data"] = obj{"ca.crt": caPEM + "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n"}
				return c
			}()}},
			want: want{condition: "RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted", refs: []string{"qwen-b:0:1"},
				warning: `backend "m" is left out of the route: the "ca.crt" of its CA ConfigMap "m-ca" cannot be used: its PEM block 2 is a private key, not a certificate; put only the backend's CA certificates (PEM) there`},
		},
		"GatewayWithoutClientCertificate": {
			reason:   "m requires the gateway's client certificate and the gateway has none: left out with a Warning saying what to set.",
			backend:  mtlsBackend("ConfigMap", true),
			gateway:  gwReady,
			observed: mtlsObserved(caCopy),
			required: map[string][]obj{"ca-configmap-m-ca": {caConfigMap()}},
			want: want{condition: "RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted", refs: []string{"qwen-b:0:1"}, caCopy: true,
				warning: `backend "m" is left out of the route: it requires the gateway's client certificate (endpoint.tlsConfig.clientCertificate), and the InferenceGateway "inference-gateway" has none; set its spec.backendTLS.clientCertificate`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := map[string][]obj{"gateway": tc.gateway}
			maps.Copy(req, tc.required)
			rsp := run(t, newRequest(t, routeXR(tc.backend, backend("b", 0, 1, "")), tc.observed, req))
			if c := summarize(rsp).Conditions[0]; c != tc.want.condition {
				t.Errorf("%s\nRoutingReady: want %s, got %s (%s)", tc.reason, tc.want.condition, c, condition(rsp, "RoutingReady").GetMessage())
			}
			if msg := condition(rsp, "RoutingReady").GetMessage(); !strings.Contains(msg, tc.want.message) {
				t.Errorf("%s\nRoutingReady message %q does not contain %q", tc.reason, msg, tc.want.message)
			}
			if diff := cmp.Diff(tc.want.refs, backendRefs(t, rsp)); diff != "" {
				t.Errorf("%s\nbackendRefs: -want, +got:\n%s", tc.reason, diff)
			}
			var warnings []string
			for _, r := range results(rsp) {
				if w, ok := strings.CutPrefix(r, "SEVERITY_WARNING: "); ok {
					warnings = append(warnings, w)
				}
			}
			if tc.want.warning == "" && len(warnings) > 0 || tc.want.warning != "" && (len(warnings) != 1 || !strings.HasPrefix(warnings[0], tc.want.warning)) {
				t.Errorf("%s\nWarnings %q, want one starting %q", tc.reason, warnings, tc.want.warning)
			}
			d, ok := rsp.GetDesired().GetResources()["ca-m"]
			if ok != tc.want.caCopy {
				t.Fatalf("%s\nca-m desired: %t, want %t", tc.reason, ok, tc.want.caCopy)
			}
			if o, seen := tc.observed["ca-m"]; ok && seen && tc.required["ca-configmap-m-ca"] != nil && len(tc.required["ca-configmap-m-ca"]) == 0 {
				if diff := cmp.Diff(o["spec"], d.GetResource().AsMap()["spec"]); diff != "" {
					t.Errorf("%s\nca-m is not carried forward: -observed, +desired:\n%s", tc.reason, diff)
				}
			}
		})
	}
}

// TestModelRouteMTLSManifests checks m's Backend and CA copy in full: the
// Backend trusts only the copy, with SNI, and names no client certificate
// (Envoy Gateway takes it from the gateway's EnvoyProxy).
func TestModelRouteMTLSManifests(t *testing.T) {
	req := map[string][]obj{"gateway": gwClientCert, "ca-configmap-m-ca": {caConfigMap()}}
	rsp := run(t, newRequest(t, routeXR(mtlsBackend("ConfigMap", true), backend("b", 0, 1, "")), mtlsObserved(object("ca-m", plainManifest("ConfigMap"), true, true)), req))
	wantTLS := obj{"caCertificateRefs": []any{obj{"group": "", "kind": "ConfigMap", "name": "qwen-m-ca"}}, "sni": "vllm.models.svc.cluster.local"}
	if diff := cmp.Diff(wantTLS, manifest(rsp, "backend-m")["spec"].(obj)["tls"]); diff != "" {
		t.Errorf("Backend m spec.tls: -want, +got:\n%s", diff)
	}
	wantCA := obj{"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj{"name": "qwen-m-ca", "namespace": teamNS}, "data": obj{"ca.crt": caPEM}}
	if diff := cmp.Diff(wantCA, manifest(rsp, "ca-m")); diff != "" {
		t.Errorf("CA copy: -want, +got:\n%s", diff)
	}
	wantPlain := obj{"wellKnownCACertificates": "System", "sni": "b.example.com"}
	if diff := cmp.Diff(wantPlain, manifest(rsp, "backend-b")["spec"].(obj)["tls"]); diff != "" {
		t.Errorf("Backend b spec.tls is not what it was: -want, +got:\n%s", diff)
	}
	rq := rsp.GetRequirements().GetResources()["ca-configmap-m-ca"]
	if rq.GetKind() != "ConfigMap" || rq.GetMatchName() != "m-ca" || rq.GetNamespace() != "ml-team" {
		t.Errorf("CA requirement: %v", rq)
	}
}

// TestModelRouteMTLSSecretCA follows a backend whose CA is a Secret over
// several reconciles, provider-kubernetes acting in between: the copy is
// created without a reference, gets it once the provider has recorded the
// create, and m joins the route once the copy is synced; the CA never
// passes through the function.
func TestModelRouteMTLSSecretCA(t *testing.T) {
	req := map[string][]obj{"gateway": gwClientCert, "ca-secret-m-ca": {caSecret()}}
	observed := mtlsObserved(nil)
	wantRefs := []any{obj{"patchesFrom": obj{"apiVersion": "v1", "kind": "Secret", "name": "m-ca", "namespace": "ml-team", "fieldPath": "data[ca.crt]"}, "toFieldPath": "data[ca.crt]"}}
	steps := []struct {
		reason     string
		references bool
		refs       []string
	}{
		{reason: "First reconcile: the copy is created without its reference; m waits.", refs: []string{"qwen-b:0:1"}},
		{reason: "The provider created the copy and recorded it: the reference is added.", references: true, refs: []string{"qwen-b:0:1"}},
		{reason: "The copy is synced with its reference: m joins.", references: true, refs: []string{"qwen-m:0:1", "qwen-b:0:1"}},
	}
	for i, s := range steps {
		rsp := run(t, newRequest(t, routeXR(mtlsBackend("Secret", true), backend("b", 0, 1, "")), observed, req))
		ca := rsp.GetDesired().GetResources()["ca-m"].GetResource().AsMap()
		var want any
		if s.references {
			want = wantRefs
		}
		if diff := cmp.Diff(want, ca["spec"].(obj)["references"], cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("step %d: %s\nca-m references: -want, +got:\n%s", i, s.reason, diff)
		}
		if diff := cmp.Diff(s.refs, backendRefs(t, rsp)); diff != "" {
			t.Errorf("step %d: %s\nbackendRefs: -want, +got:\n%s", i, s.reason, diff)
		}
		for n, r := range rsp.GetDesired().GetResources() {
			if strings.Contains(r.GetResource().String(), caPEMBase64) {
				t.Errorf("step %d: the desired %s carries the CA Secret's value", i, n)
			}
		}
		o := applyDesired(t, observed["ca-m"], rsp, "ca-m")
		if i == 0 {
			o = created(o, "crossplane.io/external-create-succeeded")
		} else {
			o = providerSyncs(t, o)
		}
		observed["ca-m"] = o
	}
}

// TestModelRouteMTLSServingBackendKeepsTLS covers a serving backend given a
// CA: its Backend keeps the TLS it serves with, carried forward, until the
// CA's copy is on the gateway cluster, so Envoy Gateway never finds a
// Backend whose CA is missing.
func TestModelRouteMTLSServingBackendKeepsTLS(t *testing.T) {
	observed := mtlsObserved(nil)
	observed["route"] = routedObject(true, "qwen-b", "qwen-m")
	serving := observed["backend-m"]
	req := map[string][]obj{"gateway": gwClientCert, "ca-configmap-m-ca": {caConfigMap()}}
	rsp := run(t, newRequest(t, routeXR(mtlsBackend("ConfigMap", true), backend("b", 0, 1, "")), observed, req))
	if diff := cmp.Diff(serving["spec"], rsp.GetDesired().GetResources()["backend-m"].GetResource().AsMap()["spec"]); diff != "" {
		t.Errorf("backend-m is not the Backend that serves: -observed, +desired:\n%s", diff)
	}
	observed["ca-m"] = object("ca-m", plainManifest("ConfigMap"), true, true)
	rsp = run(t, newRequest(t, routeXR(mtlsBackend("ConfigMap", true), backend("b", 0, 1, "")), observed, req))
	if refs := manifest(rsp, "backend-m")["spec"].(obj)["tls"].(obj)["caCertificateRefs"]; refs == nil {
		t.Errorf("backend-m does not trust its CA once the copy is on the gateway cluster: %v", manifest(rsp, "backend-m"))
	}
}
