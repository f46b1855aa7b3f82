package fn

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// The invariants every input must keep, whatever it holds (docs/design.md,
// "Nothing leaks, nothing collides"):
//
//  1. No byte of a Secret's data reaches a response or a log line, but the
//     certificates of the client CA's tls.crt, which the status publishes
//     parsed; no private key does, from a Secret or a ConfigMap.
//  2. No two composed resources, of one route or of any two routes and
//     the gateway, write one remote object, but those meant to be shared:
//     the team Namespace, and observe-only Objects.
//  3. A route serves a model name only in its own namespace's space, or
//     one without a namespace where its gateway grants it.
//  4. The same request gets the same response, messages included, whatever
//     order Go's maps meet things in.
//  5. A route with spec.gatewaySelector composes on each selected
//     gateway's cluster exactly what the same route with spec.gatewayName
//     set to that gateway composes, under the gateway's name and nothing
//     else, and routes only when every one of those routes.
//
// FuzzInvariants checks them over worlds built from the fuzzer's bytes:
// one gateway with every optional field (TLS, callers, budgets, a client
// certificate from a CA Secret of every shape, model-name grants) and up
// to four ModelRoutes in two namespaces, with route and backend names
// chosen to collide under naive naming, API keys, CAs in ConfigMaps and
// Secrets, cloud credentials, prefixes and model names good and bad, and
// spec.access; each reconciled twice, the second time with the first
// one's Objects applied, as provider-kubernetes reports them.

// invariantKeys are the key material of the worlds: made once per process.
var invariantKeys = sync.OnceValue(func() (k struct{ caCrt, caKey, otherKey, tlsCrt, tlsKey string }) {
	// Random serials and distinct names, so that no two certificates
	// share a line of PEM that the leak check would find.
	pair := func(cn string) (string, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
		if err != nil {
			panic(err)
		}
		tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, NotBefore: fuzzNow.Add(-time.Hour), NotAfter: fuzzNow.Add(time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			panic(err)
		}
		kb, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			panic(err)
		}
		return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}))
	}
	k.caCrt, k.caKey = pair("client CA of the invariants")
	_, k.otherKey = pair("another key")
	k.tlsCrt, k.tlsKey = pair("llm.example.com")
	return k
})

// invariantWorld is one gateway and its routes, and what must never leak.
type invariantWorld struct {
	gateway  obj
	required map[string][]obj
	routes   []invariantRoute
	// secrets must never reach a response or a log; forms are the forms
	// they could take there (leakForms).
	secrets, forms []string
	// grants are the gateway's spec.modelNames.unprefixedNamespaces.
	grants []string
}

// invariantRoute is one ModelRoute and what Crossplane fetches for it.
type invariantRoute struct {
	xr       obj
	required map[string][]obj
}

// newInvariantWorld builds a world from fuzz bytes.
func newInvariantWorld(data []byte) invariantWorld {
	s := &bytesource{b: data}
	k := invariantKeys()
	w := invariantWorld{required: map[string][]obj{}}
	n := 0
	secret := func() string {
		n++
		return fmt.Sprintf("sk-%02d-%x-never-publish", n, []byte{s.next(), s.next(), s.next(), s.next()})
	}
	pick := func(xs ...string) string { return xs[s.intn(len(xs))] }

	spec := obj{"providerConfigName": "gpu-cluster-1", "replicas": 2}
	if s.intn(2) == 0 {
		name := pick("llm-tls", "inference-gateway-client-ca", "inference-gateway-callers-x", "inference-gateway-client-certificate")
		spec["hostname"] = "llm.example.com"
		spec["tls"] = obj{"certificateRefs": []any{obj{"name": name}}}
		w.required["tls-secret-"+name] = []obj{{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
			"metadata": obj{"name": name, "namespace": "modelplane-system", "resourceVersion": "3"},
			"data":     obj{"tls.crt": b64(k.tlsCrt), "tls.key": b64(k.tlsKey)}}}
		w.secrets = append(w.secrets, k.tlsKey, k.tlsCrt)
	}
	if s.intn(2) == 0 {
		spec["auth"] = obj{"method": "APIKey", "apiKey": obj{"secretSelector": obj{"matchLabels": obj{"modelplane.ai/callers": "true"}}}}
		var callers []obj
		for i := range 1 + s.intn(2) {
			d := obj{}
			for j := range 1 + s.intn(3) {
				v := secret()
				if s.intn(5) == 0 {
					v = "" // an empty key: a note names the client ID
				} else {
					w.secrets = append(w.secrets, v)
				}
				d[fmt.Sprintf("client-%d-%d", i, j)] = b64(v)
			}
			callers = append(callers, callerSecret(fmt.Sprintf("callers-%d", i), "5", d))
		}
		w.required["caller-secrets"] = callers
		if s.intn(2) == 0 {
			spec["budgets"] = []any{obj{"tokens": "Total", "limit": 1000, "per": "Day", "callers": []any{obj{"name": "client-0-0", "limit": 10}}}}
		}
	}
	if s.intn(2) == 0 {
		spec["backendTLS"] = obj{"clientCertificate": obj{"caSecretRef": obj{"name": "gateway-client-ca"}}}
		crt, key := k.caCrt, k.caKey
		switch s.intn(5) {
		case 1:
			crt = k.caCrt + k.caKey // the key bundled in tls.crt
		case 2:
			crt, key = k.caKey, k.caCrt // swapped
		case 3:
			key = k.otherKey // not the certificate's key
		case 4:
			crt = "garbage-0123456789abcdef"
		}
		w.required["client-ca-secret"] = []obj{clientCASecret([]byte(crt), []byte(key))}
		w.secrets = append(w.secrets, k.caKey, k.otherKey)
		// tls.crt's text is secret but for its certificates, which the
		// status may publish: only what is not a certificate counts.
		if crt != k.caCrt && crt != k.caCrt+k.caKey && crt != k.caKey {
			w.secrets = append(w.secrets, crt)
		}
	}
	switch s.intn(3) {
	case 1:
		w.grants = []string{"ml-team"}
	case 2:
		w.grants = []string{"*"}
	}
	if w.grants != nil {
		g := make([]any, len(w.grants))
		for i, x := range w.grants {
			g[i] = x
		}
		spec["modelNames"] = obj{"unprefixedNamespaces": g}
	}
	w.gateway = gatewayXR(spec)
	served := gatewayXR(spec)
	served["status"] = obj{"address": "203.0.113.10", "conditions": []any{obj{"type": "GatewayReady", "status": "True", "reason": "Serving", "message": "serving"}}}
	if _, ok := spec["auth"]; ok {
		served["status"].(obj)["auth"] = obj{"method": "APIKey", "clientIDs": []any{"client-0-0", "client-0-1"}}
	}

	for range 1 + s.intn(4) {
		ns := pick("ml-team", "ml-team", "other-team")
		name := pick("a", "a-b", "q", "qwen3-8b", strings.Repeat("r", 58))
		req := map[string][]obj{"gateway": {served}}
		var bs []obj
		used := map[string]bool{}
		for range 1 + s.intn(3) {
			bn := pick("b-c", "c", "x", "x-ca", "ca", "sources", "vllm", "b-c-d")
			if used[bn] {
				continue
			}
			used[bn] = true
			be := obj{"name": bn, "endpoint": obj{"hostname": bn + ".example.com"}, "schema": obj{"name": "OpenAI"}}
			switch s.intn(4) {
			case 0:
				key := secret()
				w.secrets = append(w.secrets, key)
				sn := "key-" + bn
				be["apiKey"] = obj{"secretRef": obj{"name": sn, "key": "api-key"}}
				req["secret-"+sn] = []obj{{"apiVersion": "v1", "kind": "Secret", "metadata": obj{"name": sn, "namespace": ns, "resourceVersion": "9"}, "data": obj{"api-key": b64(key)}}}
			case 1:
				ca := k.caCrt
				if s.intn(2) == 0 {
					ca += k.caKey
				}
				be["endpoint"].(obj)["tlsConfig"] = obj{"caRef": obj{"name": "ca-" + bn}}
				req["ca-configmap-ca-"+bn] = []obj{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj{"name": "ca-" + bn, "namespace": ns, "resourceVersion": "4"}, "data": obj{"ca.crt": ca}}}
			case 2:
				be["endpoint"].(obj)["tlsConfig"] = obj{"caRef": obj{"kind": "Secret", "name": "ca-" + bn}}
				req["ca-secret-ca-"+bn] = []obj{{"apiVersion": "v1", "kind": "Secret", "metadata": obj{"name": "ca-" + bn, "namespace": ns, "resourceVersion": "4"}, "data": obj{"ca.crt": b64(k.caCrt + k.caKey)}}}
			default:
				if v := withCloud(be, bn, ns, req); v != "" {
					w.secrets = append(w.secrets, v)
				}
			}
			if s.intn(4) == 0 {
				be["schema"].(obj)["prefix"] = pick("/v1", "v1", "/api/v1", "https://user:pass@example.com/v1", "/v1\r\nx-injected: 1")
			}
			bs = append(bs, be)
		}
		xr := routeXR(bs...)
		xr["metadata"] = obj{"name": name, "namespace": ns}
		if m := pick("", "", ns+"/m", "other-team/m", "ml-team/m", "gpt-4o", "m\r\nx-ai-eg-model: x"); m != "" {
			xr["spec"].(obj)["model"] = m
		}
		// Every route but q on a gateway with callers restricts them, one
		// of them unknown: its SecurityPolicy's name must meet no other
		// route's. Chosen from what the world has, so the seeds keep
		// their worlds; on an open gateway such a route would compose
		// nothing (AccessNotEnforceable), and hide what the seeds test.
		if _, auth := spec["auth"]; auth && name != "q" {
			xr["spec"].(obj)["access"] = obj{"callers": []any{"client-0-0", "client-9"}}
		}
		w.routes = append(w.routes, invariantRoute{xr: xr, required: req})
	}
	for _, sec := range w.secrets {
		w.forms = append(w.forms, leakForms(sec)...)
	}
	return w
}

// withCloud gives a backend with neither key nor CA of its own the cloud
// credentials its name calls for, with the Secret Crossplane fetches for
// them in req, and returns the secret value that Secret holds ("" for
// none): x signs for AWS with a credentials file, c with the pods' own
// identity, vllm authenticates to GCP with a service account key, b-c-d to
// Azure with a client secret. No fuzz byte decides it, so every seed keeps
// the world it had.
func withCloud(be obj, bn, ns string, req map[string][]obj) string {
	secret := fmt.Sprintf("cloud-%s-%s-never-publish", ns, bn)
	var creds obj
	var data obj
	switch bn {
	case "x":
		be["schema"] = obj{"name": "AWSBedrock"}
		creds = obj{"aws": obj{"region": "eu-west-1", "secretRef": obj{"name": "cloud-" + bn, "key": "credentials"}}}
		data = obj{"credentials": b64("[default]\naws_access_key_id = AKIAFUZZ\naws_secret_access_key = " + secret + "\n")}
	case "c":
		be["schema"] = obj{"name": "AWSBedrock"}
		be["credentials"] = obj{"aws": obj{"region": "us-east-1"}}
		return ""
	case "vllm":
		be["schema"] = obj{"name": "GCPVertexAI"}
		creds = obj{"gcp": obj{"projectName": "p", "region": "europe-west4", "secretRef": obj{"name": "cloud-" + bn, "key": "key.json"}}}
		data = obj{"key.json": b64(`{"type":"service_account","private_key":"` + secret + `"}`)}
	case "b-c-d":
		be["schema"] = obj{"name": "AzureOpenAI", "version": "2024-10-21"}
		creds = obj{"azure": obj{"clientID": "app", "tenantID": "tenant", "clientSecretRef": obj{"name": "cloud-" + bn, "key": "client-secret"}}}
		data = obj{"client-secret": b64(secret)}
	default:
		return ""
	}
	be["credentials"] = creds
	req["secret-cloud-"+bn] = []obj{{"apiVersion": "v1", "kind": "Secret", "metadata": obj{"name": "cloud-" + bn, "namespace": ns, "resourceVersion": "5"}, "data": data}}
	return secret
}

// reconcile runs req as a served function would, twice on fresh functions
// with a log each, and fails unless both answer the same (invariant 4).
// It returns the response and the log.
func reconcile(t *testing.T, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, string) {
	t.Helper()
	var rsps [2]*fnv1.RunFunctionResponse
	var logs bytes.Buffer
	for i := range rsps {
		log := logging.NewLogrLogger(funcr.New(func(prefix, args string) { logs.WriteString(prefix + args + "\n") }, funcr.Options{Verbosity: 10}))
		f := New(log)
		f.now = newAt(fuzzNow).now
		rsp, err := f.RunFunction(t.Context(), req)
		if err != nil {
			t.Fatalf("RunFunction returned an error: %v", err)
		}
		rsps[i] = rsp
	}
	// proto.Equal first: cmp.Diff is the slow part, and only says what
	// differs.
	if !proto.Equal(rsps[0], rsps[1]) {
		t.Fatalf("invariant 4: one request, two responses (-first +second):\n%s", cmp.Diff(rsps[0], rsps[1], protocmp.Transform()))
	}
	return rsps[0], logs.String()
}

// settle is the observed state after Crossplane applied rsp's desired
// Objects and provider-kubernetes created and synced them.
func settle(t *testing.T, rsp *fnv1.RunFunctionResponse) map[string]obj {
	t.Helper()
	out := map[string]obj{}
	for n := range rsp.GetDesired().GetResources() {
		out[n] = providerSyncs(t, applyDesired(t, nil, rsp, n))
	}
	return out
}

// remoteObject is what an Object writes on a cluster.
type remoteObject struct{ cluster, kind, namespace, name string }

// writes is what rsp's desired Objects write, by composition resource
// name, less the shared ones (invariant 2).
func writes(rsp *fnv1.RunFunctionResponse) map[string]remoteObject {
	out := map[string]remoteObject{}
	for n, r := range rsp.GetDesired().GetResources() {
		o := r.GetResource().AsMap()
		spec, _ := o["spec"].(obj)
		if mp, _ := spec["managementPolicies"].([]any); len(mp) == 1 && mp[0] == "Observe" {
			continue
		}
		fp, _ := spec["forProvider"].(obj)
		m, _ := fp["manifest"].(obj)
		md, _ := m["metadata"].(obj)
		kind, _ := m["kind"].(string)
		if kind == "Namespace" {
			continue
		}
		pc, _ := spec["providerConfigRef"].(obj)
		cluster, _ := pc["name"].(string)
		ns, _ := md["namespace"].(string)
		name, _ := md["name"].(string)
		out[n] = remoteObject{cluster, kind, ns, name}
	}
	return out
}

// checkNoSecret fails if any of w's secrets, or any private key, stands in
// text (invariant 1).
func checkNoSecret(t *testing.T, what, text string, w invariantWorld) {
	t.Helper()
	for _, f := range w.forms {
		if j := strings.Index(text, f); j >= 0 {
			t.Fatalf("invariant 1: a Secret value reached %s: ...%s...", what, text[max(0, j-200):min(len(text), j+len(f)+50)])
		}
	}
	if strings.Contains(text, "PRIVATE KEY-----") {
		t.Fatalf("invariant 1: a private key's PEM block reached %s", what)
	}
}

// checkModels fails if rsp's route serves a name outside its namespace's
// space that the gateway does not grant (invariant 3). It states the rule
// itself, not through v1alpha1.ModelRefusal: an oracle must not call the
// code it checks.
func checkModels(t *testing.T, rsp *fnv1.RunFunctionResponse, ns string, grants []string) {
	t.Helper()
	m := manifest(rsp, "route")
	if m == nil {
		return
	}
	for _, model := range listedModels(m) {
		first, _, prefixed := strings.Cut(model, "/")
		switch {
		case prefixed && len(validation.IsDNS1123Label(first)) == 0:
			if first != ns {
				t.Fatalf("invariant 3: a route in %s serves %q, in the namespace %s's space", ns, model, first)
			}
		case !slices.Contains(grants, ns) && !slices.Contains(grants, "*"):
			t.Fatalf("invariant 3: a route in %s serves %q, which starts with no namespace, and the gateway grants such names to %v", ns, model, grants)
		}
	}
}

func FuzzInvariants(f *testing.F) {
	// More seeds are under testdata/fuzz/FuzzInvariants: inputs the fuzzer
	// found failing with a deliberate break (invariant_breaks_test.go).
	for _, seed := range [][]byte{
		// A gateway with TLS, callers (one with two empty keys), budgets
		// and a client certificate from a CA Secret; route a with an
		// API-keyed backend b-c.
		{},
		// Route a in other-team asks for ml-team/m; the gateway grants
		// names without a namespace to ml-team only.
		{1, 1, 1, 1, 0, 2, 0, 2, 0, 3, 0, 0, 0, 0, 4},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w := newInvariantWorld(data)
		all := map[remoteObject]string{}
		claim := func(owner string, rsp *fnv1.RunFunctionResponse) {
			for key, ro := range writes(rsp) {
				if prev, ok := all[ro]; ok {
					t.Fatalf("invariant 2: %s %s/%s on %s is written by %s and by %s %s", ro.kind, ro.namespace, ro.name, ro.cluster, prev, owner, key)
				}
				all[ro] = owner + " " + key
			}
		}
		check := func(owner string, xr obj, required map[string][]obj) *fnv1.RunFunctionResponse {
			var observed map[string]obj
			var rsp *fnv1.RunFunctionResponse
			for i := range 2 {
				var log string
				rsp, log = reconcile(t, newRequest(t, xr, observed, required))
				out, err := protojson.Marshal(rsp)
				if err != nil {
					t.Fatal(err)
				}
				checkNoSecret(t, fmt.Sprintf("the response to %s (reconcile %d)", owner, i), string(out), w)
				checkNoSecret(t, fmt.Sprintf("the log of %s (reconcile %d)", owner, i), log, w)
				observed = settle(t, rsp)
			}
			return rsp
		}
		claim("the gateway", check("the gateway", w.gateway, w.required))
		for i, r := range w.routes {
			md := r.xr["metadata"].(obj)
			owner := fmt.Sprintf("route %d (%s/%s)", i, md["namespace"], md["name"])
			// Two routes of one name in one namespace are one route.
			dup := false
			for _, p := range w.routes[:i] {
				pmd := p.xr["metadata"].(obj)
				dup = dup || pmd["namespace"] == md["namespace"] && pmd["name"] == md["name"]
			}
			if dup {
				continue
			}
			rsp := check(owner, r.xr, r.required)
			checkModels(t, rsp, md["namespace"].(string), w.grants)
			claim(owner, rsp)
			checkFleet(t, owner, r, rsp, check)
		}
	})
}

// checkFleet fails unless route r, made a fleet route over its gateway
// and a second one on another cluster, composes on each exactly what r
// composes with spec.gatewayName set to that gateway (rsp, for the first),
// under the gateway's name, and is RoutingReady only when both are
// (invariant 5). Nothing of the fuzzer's bytes is read, so the seeds of
// the other invariants keep their worlds.
func checkFleet(t *testing.T, owner string, r invariantRoute, rsp *fnv1.RunFunctionResponse, check func(string, obj, map[string][]obj) *fnv1.RunFunctionResponse) {
	t.Helper()
	first := r.required["gateway"][0]
	second := copyOf(t, first)
	second["metadata"] = obj{"name": "inference-gateway-2"}
	second["spec"].(obj)["providerConfigName"] = "gpu-cluster-2"
	gateways := []obj{copyOf(t, first), second, copyOf(t, first)}
	for i, g := range gateways {
		md := obj{"name": fmt.Sprint(g["metadata"].(obj)["name"]), "labels": obj{"region": "eu"}}
		if i == 2 {
			md = obj{"name": "inference-gateway-us", "labels": obj{"region": "us"}}
		}
		g["metadata"] = md
	}
	xr2 := copyOf(t, r.xr)
	xr2["spec"].(obj)["gatewayName"] = "inference-gateway-2"
	req2 := maps.Clone(r.required)
	req2["gateway"] = []obj{second}
	single := map[string]*fnv1.RunFunctionResponse{
		"inference-gateway":   rsp,
		"inference-gateway-2": check(owner+" on inference-gateway-2", xr2, req2),
	}

	fleet := copyOf(t, r.xr)
	delete(fleet["spec"].(obj), "gatewayName")
	fleet["spec"].(obj)["gatewaySelector"] = obj{"matchLabels": obj{"region": "eu"}}
	freq := maps.Clone(r.required)
	delete(freq, "gateway")
	freq["gateways"] = gateways
	frsp := check(owner+" as a fleet route", fleet, freq)

	got := frsp.GetDesired().GetResources()
	want := 0
	ready := true
	for gw, one := range single {
		for k, d := range one.GetDesired().GetResources() {
			want++
			if diff := cmp.Diff(composedAs(d), composedAs(got[gw+"/"+k])); diff != "" {
				t.Fatalf("invariant 5: %s as a fleet route composes %s/%s otherwise than with spec.gatewayName %s (-gatewayName +fleet):\n%s", owner, gw, k, gw, diff)
			}
		}
		ready = ready && condition(one, "RoutingReady").GetStatus() == fnv1.Status_STATUS_CONDITION_TRUE
	}
	if len(got) != want {
		t.Fatalf("invariant 5: %s as a fleet route composes %d resources, its two gateways' routes %d: %v", owner, len(got), want, slices.Sorted(maps.Keys(got)))
	}
	if fr := condition(frsp, "RoutingReady").GetStatus() == fnv1.Status_STATUS_CONDITION_TRUE; fr != ready {
		t.Fatalf("invariant 5: %s as a fleet route says RoutingReady %t, its two gateways' routes together %t", owner, fr, ready)
	}
}

// composedAs is a desired resource as Crossplane applies it, less what
// names its Object on the control plane: the composition resource name,
// and the Object's name, which the test's observed Objects take from it
// (Crossplane makes it from a hash of it).
func composedAs(r *fnv1.Resource) obj {
	if r == nil {
		return nil
	}
	o := r.GetResource().AsMap()
	if md, ok := o["metadata"].(obj); ok {
		delete(md, "name")
		if a, ok := md["annotations"].(obj); ok {
			delete(a, "crossplane.io/composition-resource-name")
			if len(a) == 0 {
				delete(md, "annotations")
			}
		}
	}
	return obj{"resource": o, "ready": r.GetReady().String()}
}

// copyOf is a deep copy of o, through the Struct newRequest makes of it.
func copyOf(t *testing.T, o obj) obj { return mustStruct(t, o).AsMap() }
