package fn

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// bytesource turns fuzz bytes into choices; it yields zeros once drained.
type bytesource struct {
	b []byte
}

func (s *bytesource) next() byte {
	if len(s.b) == 0 {
		return 0
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c
}

func (s *bytesource) intn(n int) int { return int(s.next()) % n }

// value picks a value for a field: usually a good one, sometimes one of the
// wrong type or out of range.
func (s *bytesource) value(good any) any {
	switch s.intn(12) {
	case 0:
		return nil
	case 1:
		return "x"
	case 2:
		return -1.5
	case 3:
		return []any{good}
	case 4:
		return map[string]any{"v": good}
	case 5:
		return 1e9
	default:
		return good
	}
}

// fuzzRequest builds a request for either kind from fuzz bytes, with
// observed Objects and required resources in any state, some malformed. It
// returns the names the spec implies, when the spec is well formed enough
// for the test to tell.
func fuzzRequest(t *testing.T, data []byte) (*fnv1.RunFunctionRequest, map[string]bool) {
	s := &bytesource{b: data}
	implied := map[string]bool{}
	observed := map[string]obj{}
	var required map[string][]obj
	var xr obj
	// live names the Objects observed Synced with a manifest: what the
	// provider last saw of the remote object.
	live := map[string]bool{}
	obsObject := func(name string, m obj) {
		switch s.intn(6) {
		case 0:
			return
		case 1:
			observed[name] = object(name, nil, false, false)
		case 2:
			o := object(name, m, true, true)
			o["status"].(obj)["conditions"] = s.value([]any{})
			observed[name] = o
		case 3:
			observed[name] = object(name, m, false, true)
		default:
			observed[name] = object(name, m, true, s.intn(2) == 0)
			live[name] = true
		}
	}
	switch s.intn(3) {
	case 0: // InferenceGateway
		spec := obj{"providerConfigName": s.value("gpu-cluster-1"), "replicas": s.value(float64(s.intn(4)))}
		if s.intn(3) == 0 {
			spec["hostname"] = s.value("llm.example.com")
			spec["tls"] = s.value(obj{"certificateRefs": []any{obj{"name": s.value("tls")}}})
		}
		xr = gatewayXR(spec)
		for _, n := range allGateway {
			implied[n] = true
		}
		// A TLS spec that is not well formed is Fatal; a well-formed one
		// implies the redirect and a copy of each certificate's Secret.
		if tls, ok := spec["tls"].(obj); ok {
			implied["https-redirect-route"] = true
			refs, _ := tls["certificateRefs"].([]any)
			for _, r := range refs {
				if rm, _ := r.(obj); rm != nil {
					if n, ok := rm["name"].(string); ok {
						implied["tls-secret-"+n] = true
					}
				}
			}
		}
		obsObject("https-redirect-route", plainManifest("HTTPRoute"))
		obsObject("tls-secret-tls", plainManifest("Secret"))
		for _, n := range frontDoor() {
			obsObject(n, plainManifest("HTTPRoute"))
		}
		switch s.intn(3) {
		case 0:
			required = map[string][]obj{"tls-secret-tls": {}}
		case 1:
			sec := tlsSecret(s.intn(2) == 0, s.intn(2) == 0)
			sec["metadata"].(obj)["name"] = "tls"
			required = map[string][]obj{"tls-secret-tls": {sec}}
		}
		dep := deploymentManifest(float64(s.intn(4)), float64(s.intn(4)), s.intn(2) == 0, float64(s.intn(4)), float64(s.intn(4)), float64(s.intn(4)))
		if s.intn(8) == 0 {
			dep["status"].(obj)["replicas"] = s.value(2.0)
		}
		obsObject("envoy-deployment", dep)
		obsObject("gateway", gatewayManifest([]string{"", "203.0.113.10"}[s.intn(2)]))
		obsObject("anchor-route", acceptedManifest("AIGatewayRoute", "a", s.intn(2) == 0))
		obsObject("envoy-proxy", plainManifest("EnvoyProxy"))
		obsObject("failover-policy", policyManifest("BackendTrafficPolicy", s.intn(2) == 0))
		obsObject("client-policy", policyManifest("ClientTrafficPolicy", s.intn(2) == 0))
		obsObject("gateway-namespace", plainManifest("Namespace"))
		// Sometimes another InferenceGateway serves the same cluster: this
		// one loses it and releases (desires observe-only) all it observed.
		if s.intn(4) == 0 {
			if required == nil {
				required = map[string][]obj{}
			}
			required["inference-gateways"] = []obj{namedGateway("prod", "2026-01-01T00:00:00Z", "203.0.113.10"), xr}
			if spec["providerConfigName"] == "gpu-cluster-1" {
				implied = map[string]bool{}
				for n := range observed {
					implied[n] = true
				}
			}
		}
	case 1: // ModelRoute
		var bs []obj
		implied["namespace"], implied["route"], implied["httproute"], implied["gateway-status"] = true, true, true, true
		for i := range s.intn(5) {
			n := fmt.Sprintf("b%d", s.intn(4))
			key := ""
			if s.intn(2) == 0 {
				key = fmt.Sprintf("key-%d", i)
			}
			b := backend(n, s.intn(70), s.intn(3)*500000, key)
			if s.intn(6) == 0 {
				b["endpoint"] = s.value(obj{"hostname": "a.example.com"})
			}
			bs = append(bs, b)
			implied["backend-"+n], implied["aibackend-"+n] = true, true
			if key != "" {
				// A key is a source the route follows: the sources
				// ConfigMap (internal/route/resources.go, implied).
				implied["credential-"+n], implied["credpolicy-"+n], implied["sources"] = true, true, true
			}
		}
		xr = routeXR(bs...)
		if s.intn(8) == 0 {
			xr["spec"].(obj)["gatewayName"] = s.value("inference-gateway")
		}
		for _, n := range []string{"namespace", "route", "backend-b0", "aibackend-b0", "credential-b0", "credpolicy-b0", "backend-b7", "aibackend-b7"} {
			obsObject(n, acceptedManifest("AIGatewayRoute", "r", s.intn(2) == 0))
		}
		obsObject("httproute", httpRouteManifest(s.intn(2) == 0, s.intn(2) == 0))
		// While the HTTPRoute AI Gateway generates is observed but not
		// live, what Envoy Gateway serves may still name any backend's
		// objects: the function keeps every one observed
		// (internal/route/resources.go, implied).
		if _, ok := observed["httproute"]; ok && !live["httproute"] {
			for n := range observed {
				for _, p := range []string{"backend-", "aibackend-", "credential-", "credpolicy-"} {
					if strings.HasPrefix(n, p) {
						implied[n] = true
					}
				}
			}
		}
		if s.intn(4) > 0 {
			required = map[string][]obj{}
			switch s.intn(4) {
			case 0:
				required["gateway"] = nil
			case 1:
				required["gateway"] = gwRolling
			case 2:
				g := inferenceGateway(true, "Serving", s.intn(2) == 0)
				g["spec"].(obj)["providerConfigName"] = s.value("p")
				required["gateway"] = []obj{g}
			default:
				required["gateway"] = gwReady
			}
			for i := range 4 {
				if s.intn(3) > 0 {
					required[fmt.Sprintf("secret-key-%d", i)] = []obj{secret(fmt.Sprintf("key-%d", i), obj{"api-key": s.value(apiKeyValue)})}
				}
			}
		}
	default: // another kind
		xr = obj{"apiVersion": "example.org/v1", "kind": fmt.Sprintf("K%d", s.intn(3)), "metadata": obj{"name": "x"}}
	}
	return newRequest(t, xr, observed, required), implied
}

// fuzzNow is the clock of the two functions FuzzRunFunction compares, so
// that they agree on the times the statuses record.
var fuzzNow = time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)

// fuzzWire is the function as served, its struct cache shared by every input
// a fuzzing process tries, as a served function's is by every composite.
var fuzzWire = newAt(fuzzNow).Wire()

// FuzzRunFunction feeds RunFunction requests of both kinds built from fuzzed
// XRs, observed Objects and required resources. RunFunction must never
// panic, must always return a response, and must never desire less than was
// observed, except what the spec removed; a Fatal result must pass the
// desired state through untouched. What Wire sends must decode to the
// response RunFunction returns.
func FuzzRunFunction(f *testing.F) {
	for _, seed := range [][]byte{
		{}, {0}, {1}, {2}, {0, 5, 5, 5, 5, 5, 5}, {1, 4, 0, 1, 0, 3, 2, 9, 9, 9, 9, 9},
		{1, 2, 1, 1, 1, 0, 0, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}, {0, 2, 2, 0, 1, 2, 3, 1, 1, 0, 4, 4, 4, 4, 4, 4},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, implied := fuzzRequest(t, data)
		sent, err := fuzzWire.RunFunction(t.Context(), proto.CloneOf(req))
		if err != nil {
			t.Fatalf("RunFunction returned an error: %v", err)
		}
		rsp, err := newAt(fuzzNow).RunFunction(t.Context(), req)
		if err != nil {
			t.Fatalf("RunFunction returned an error: %v", err)
		}
		b, err := proto.Marshal(sent)
		if err != nil {
			t.Fatalf("cannot encode what Wire sends: %v", err)
		}
		decoded := &fnv1.RunFunctionResponse{}
		if err := proto.Unmarshal(b, decoded); err != nil {
			t.Fatalf("cannot decode what Wire sends: %v", err)
		}
		if diff := cmp.Diff(rsp, decoded, protocmp.Transform()); diff != "" {
			t.Fatalf("what Wire sends is not what RunFunction returns (-RunFunction +Wire):\n%s", diff)
		}
		for _, r := range rsp.GetResults() {
			if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
				if len(rsp.GetDesired().GetResources()) != len(req.GetDesired().GetResources()) {
					t.Fatalf("a Fatal result changed the desired resources")
				}
				return
			}
		}
		desired := rsp.GetDesired().GetResources()
		// A refused spec keeps everything as it was (compose.Refuse).
		for _, c := range rsp.GetConditions() {
			if c.GetReason() != "SpecRefused" {
				continue
			}
			if len(desired) != len(req.GetObserved().GetResources()) {
				t.Fatalf("a refused spec desired %d resources, observed %d", len(desired), len(req.GetObserved().GetResources()))
			}
			for n := range req.GetObserved().GetResources() {
				if desired[n] == nil {
					t.Fatalf("a refused spec no longer desires observed %q", n)
				}
			}
			return
		}
		for n := range req.GetObserved().GetResources() {
			if implied[n] && desired[n] == nil {
				t.Fatalf("observed %q is implied by the spec but no longer desired", n)
			}
		}
		for n := range desired {
			if !implied[n] {
				t.Fatalf("desired %q is not implied by the spec", n)
			}
		}
	})
}
