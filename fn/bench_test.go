package fn

import (
	"fmt"
	"testing"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
)

func benchmark(b *testing.B, req *fnv1.RunFunctionRequest, uncached bool) {
	f := New(logging.NewNopLogger())
	if uncached {
		f.structs = nil // every Struct built afresh
	}
	b.ReportAllocs()
	for b.Loop() {
		// Crossplane sends a fresh request each time; response.To hands
		// the request's desired state to the response, which fills it.
		req.Desired = &fnv1.State{}
		rsp, err := f.RunFunction(b.Context(), req)
		if err != nil || len(rsp.GetResults()) > 0 && rsp.GetResults()[0].GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
			b.Fatal(err, rsp.GetResults())
		}
	}
}

// BenchmarkRunFunction measures one reconcile of a rolled-out gateway and
// of a ready ModelRoute with 1 and 16 backends (16 is the most a model can
// have: v1alpha1.MaxBackends), every one with an API
// key and every composed Object observed: the steady state, in which the
// desired objects are those of the last reconcile.
func BenchmarkRunFunction(b *testing.B) {
	benchmarkAll(b, false)
}

// BenchmarkRunFunctionUncached is the same with every Struct built afresh,
// as on a composite's first reconcile or after its spec changed.
func BenchmarkRunFunctionUncached(b *testing.B) {
	benchmarkAll(b, true)
}

func benchmarkAll(b *testing.B, uncached bool) {
	b.Run("InferenceGateway", func(b *testing.B) {
		benchmark(b, newRequest(b, gatewayXR(nil), observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true), nil), uncached)
	})
	for _, n := range []int{1, v1alpha1.MaxBackends} {
		b.Run(fmt.Sprintf("ModelRoute/backends=%d", n), func(b *testing.B) {
			benchmark(b, routeRequest(b, n), uncached)
		})
	}
}

func routeRequest(b testing.TB, n int) *fnv1.RunFunctionRequest {
	backends := make([]obj, n)
	observed := map[string]obj{
		"namespace": object("namespace", plainManifest("Namespace"), true, true),
		"route":     object("route", acceptedManifest("AIGatewayRoute", "qwen", true), true, true),
		"httproute": object("httproute", httpRouteManifest(true, true), true, true),
	}
	required := map[string][]obj{"gateway": gwReady}
	for i := range n {
		name := fmt.Sprintf("b%d", i)
		backends[i] = backend(name, i%4, 1+i, "key-"+name)
		for _, p := range []string{"backend-", "aibackend-", "credential-", "credpolicy-"} {
			observed[p+name] = object(p+name, plainManifest("X"), true, true)
		}
		withReferences(observed["credential-"+name])
		required["secret-key-"+name] = []obj{secret("key-"+name, obj{"api-key": apiKeyValue})}
	}
	return newRequest(b, routeXR(backends...), observed, required)
}
