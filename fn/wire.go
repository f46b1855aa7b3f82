package fn

import (
	"context"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// Wire returns f as cmd/function serves it over gRPC: each response it
// returns is f's, with every desired composed resource that f's struct
// cache holds sent as the bytes it was encoded to when it was cached
// (structcache.Cache.Precode, which says why that is the same message on
// the wire), so gRPC does not encode the same Structs again on every call.
// The tests call RunFunction, whose responses hold the Structs; TestWire
// and FuzzRunFunction check that what Wire sends decodes to the same
// message.
func (f *Function) Wire() fnv1.FunctionRunnerServiceServer {
	return wire{f: f}
}

type wire struct {
	fnv1.UnimplementedFunctionRunnerServiceServer
	f *Function
}

// RunFunction runs the Function's RunFunction and precodes its response.
func (w wire) RunFunction(ctx context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	rsp, err := w.f.RunFunction(ctx, req)
	if err != nil {
		return rsp, err
	}
	w.f.structs.Precode(rsp)
	return rsp, nil
}
