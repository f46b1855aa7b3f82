package fn

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	function "github.com/crossplane/function-sdk-go"
	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/response"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
)

// grpcReps is how many times BenchmarkGRPC measures each server on each
// request, the two servers alternating, so that a change in the machine's
// load falls on both.
const grpcReps = 5

// floor is the protocol floor: a function that returns response.To and
// nothing else. Fed the same request, it costs what any function costs
// over gRPC: the request's encoding and decoding, the transport, and a
// response of the request's desired state.
type floor struct {
	fnv1.UnimplementedFunctionRunnerServiceServer
}

func (floor) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	return response.To(req, response.DefaultTTL), nil
}

// echo returns a response it was given, whatever the request: the
// function's own response to the benchmark's request as Wire sends it,
// computed once. Fed the same request, it costs what the protocol costs
// for the function's exchange (the request and the function's response
// encoded, sent and decoded) without composing anything, so function/echo
// is what composing adds, and echo/floor what the response's bytes cost.
type echo struct {
	fnv1.UnimplementedFunctionRunnerServiceServer
	rsp *fnv1.RunFunctionResponse
}

func (e echo) RunFunction(context.Context, *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	return e.rsp, nil
}

// BenchmarkGRPC measures one RunFunction call over loopback gRPC to this
// function, served by function-sdk-go's Serve as cmd/function serves it,
// to the protocol floor, and to echo of the function's response, each fed
// the same request: a rolled-out
// InferenceGateway's (12 composed resources observed) and a ready ModelRoute
// of v1alpha1.MaxBackends backends (68). Each server runs on each request
// grpcReps times, alternating (rep=N; benchstat -ignore /rep pools them),
// and reports the median call (p50-ns/op) beside the mean, and the CPU
// time per call of the whole process, client and server (cpu-ns/op), which
// varies less on a shared machine; a last line per request gives the
// function/floor and function/echo ratios of the medians of the reps'
// figures.
// Run it with -count 1 (make bench-grpc).
//
// Both are served without mTLS and without the SDK's metrics interceptor,
// which cmd/function has: each costs the two servers the same per call or
// per byte, so leaving them out makes the ratio no smaller.
func BenchmarkGRPC(b *testing.B) {
	f := New(logging.NewNopLogger())
	servers := []string{"function", "floor", "echo"}
	requests := []struct {
		name string
		req  *fnv1.RunFunctionRequest
	}{
		{"InferenceGateway", newRequest(b, gatewayXR(nil), observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true), nil)},
		{fmt.Sprintf("ModelRoute-%d", v1alpha1.MaxBackends), routeRequest(b, v1alpha1.MaxBackends)},
	}
	// The function as cmd/function serves it.
	fc, flc := serveLoopback(b, f.Wire()), serveLoopback(b, floor{})
	// clients[request][server]; echo is a server per request.
	clients := map[string]map[string]fnv1.FunctionRunnerServiceClient{}
	responseSize := map[string]int{}
	for _, r := range requests {
		// On a copy: response.To shares the request's desired state with
		// the response (function-sdk-go response.To), so composing fills
		// in the request it was given.
		rsp, err := f.Wire().RunFunction(b.Context(), proto.CloneOf(r.req))
		if err != nil {
			b.Fatal(err)
		}
		clients[r.name] = map[string]fnv1.FunctionRunnerServiceClient{"function": fc, "floor": flc, "echo": serveLoopback(b, echo{rsp: rsp})}
		responseSize[r.name] = proto.Size(rsp)
	}
	// p50s[request][server] holds each rep's median call, cpus its CPU
	// time per call.
	p50s, cpus := map[string]map[string][]time.Duration{}, map[string]map[string][]time.Duration{}
	for rep := 1; rep <= grpcReps; rep++ {
		for _, r := range requests {
			if p50s[r.name] == nil {
				p50s[r.name], cpus[r.name] = map[string][]time.Duration{}, map[string][]time.Duration{}
			}
			for _, s := range servers {
				var p50, cpu time.Duration // the last run's, if testing runs the function twice
				if b.Run(fmt.Sprintf("rep=%d/request=%s/server=%s", rep, r.name, s), func(b *testing.B) {
					p50, cpu = callLoop(b, clients[r.name][s], r.req)
				}) && p50 > 0 {
					p50s[r.name][s] = append(p50s[r.name][s], p50)
					cpus[r.name][s] = append(cpus[r.name][s], cpu)
				}
			}
		}
	}
	for _, r := range requests {
		p, c := map[string]time.Duration{}, map[string]time.Duration{}
		for _, s := range servers {
			p[s], c[s] = median(p50s[r.name][s]), median(cpus[r.name][s])
		}
		if p["function"] == 0 || p["floor"] == 0 || p["echo"] == 0 {
			continue // filtered out by -bench
		}
		ratio := func(m map[string]time.Duration, a, b string) float64 { return float64(m[a]) / float64(max(m[b], 1)) }
		round := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
		// Printed, not logged: a benchmark's log shows only with -v.
		// benchstat skips lines that are not results.
		fmt.Printf("# %s, a request of %d KB, %d observed resources, a response of %d KB, medians of %d reps: "+
			"p50 function %v, floor %v, echo %v, function/floor %.2f, function/echo %.2f; "+
			"CPU per call function %v, floor %v, echo %v, function/floor %.2f, function/echo %.2f\n",
			r.name, proto.Size(r.req)/1024, len(r.req.GetObserved().GetResources()), responseSize[r.name]/1024, len(p50s[r.name]["function"]),
			round(p["function"]), round(p["floor"]), round(p["echo"]), ratio(p, "function", "floor"), ratio(p, "function", "echo"),
			round(c["function"]), round(c["floor"]), round(c["echo"]), ratio(c, "function", "floor"), ratio(c, "function", "echo"))
	}
}

// callLoop calls RunFunction with req for the benchmark's iterations and
// returns the median call and the CPU time per call of the whole process,
// client and server, which it also reports.
func callLoop(b *testing.B, c fnv1.FunctionRunnerServiceClient, req *fnv1.RunFunctionRequest) (p50, cpu time.Duration) {
	b.ReportAllocs()
	var calls []time.Duration
	cpu0 := cpuTime()
	for b.Loop() {
		start := time.Now()
		rsp, err := c.RunFunction(b.Context(), req)
		calls = append(calls, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		if r := rsp.GetResults(); len(r) > 0 && r[0].GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
			b.Fatal(r)
		}
	}
	cpu = (cpuTime() - cpu0) / time.Duration(len(calls))
	p50 = median(calls)
	b.ReportMetric(float64(p50.Nanoseconds()), "p50-ns/op")
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds()), "cpu-ns/op")
	}
	return p50, cpu
}

// serveLoopback serves srv with function.Serve on a loopback port and
// returns a client of it. Serve never returns: the server lives as long as
// the test binary.
func serveLoopback(b *testing.B, srv fnv1.FunctionRunnerServiceServer) fnv1.FunctionRunnerServiceClient {
	b.Helper()
	// Serve takes an address, not a listener: find a free port, free it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	go func() {
		// Without metrics: a second Serve would register the same
		// collectors again with Prometheus' default registry.
		err := function.Serve(srv, function.Listen("tcp", addr), function.Insecure(true), function.WithMetricsServer(""))
		b.Errorf("cannot serve on %s: %v", addr, err)
	}()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	c := fnv1.NewFunctionRunnerServiceClient(conn)
	// Wait for the server to listen.
	ctx, cancel := context.WithTimeout(b.Context(), 30*time.Second)
	defer cancel()
	if _, err := c.RunFunction(ctx, &fnv1.RunFunctionRequest{}, grpc.WaitForReady(true)); err != nil {
		b.Fatalf("cannot call the function on %s: %v", addr, err)
	}
	return c
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
