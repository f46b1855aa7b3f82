package fn

import (
	"context"
	"slices"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/crossplane/function-sdk-go/errors"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// resourceField is the number of a Resource's resource field, the Struct
// that holds a desired object.
var resourceField = (&fnv1.Resource{}).ProtoReflect().Descriptor().Fields().ByName("resource").Number()

// Wire returns f as cmd/function serves it over gRPC: each response it
// returns is f's, with every desired composed resource that f's struct
// cache holds sent as the bytes it was encoded to when it was cached.
//
// gRPC encodes the whole response on every call (grpc-go encoding/proto
// codecV2.Marshal: proto.Size, then MarshalAppend), walking every Value of
// every desired object, although on almost every reconcile they are the
// same Structs, from the cache. protobuf-go writes a message's unknown
// fields out as they are, after its known fields (internal/impl/encode.go,
// marshalAppendPointer), so a Resource whose resource field is nil and
// whose unknown fields hold that field's encoding is, on the wire, the
// same Resource: Crossplane decodes the Struct from it as from any other.
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
	w.f.structs.precode(rsp)
	return rsp, nil
}

// precode replaces each desired composed resource's Struct that c holds
// with its encoding. A Struct the cache holds reaches a response only in a
// Resource that write made, with no unknown fields of its own to lose. A
// Struct the cache no longer holds (it started again empty since) is left
// to gRPC to encode.
func (c *structCache) precode(rsp *fnv1.RunFunctionResponse) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range rsp.GetDesired().GetResources() {
		w, ok := c.wire[r.GetResource()]
		if !ok {
			continue
		}
		r.Resource = nil
		// The same bytes go into many responses: gRPC only reads them.
		r.ProtoReflect().SetUnknown(w)
	}
}

// encodeResourceField encodes s as a Resource's resource field: its tag,
// its length and its bytes, once, when s is cached. SetUnknown keeps the
// slice it is given, not a copy (protobuf-go internal/impl/
// message_reflect.go, setUnknown), so the slice is clipped to its length:
// nothing can append to the shared bytes in place.
func encodeResourceField(s *structpb.Struct) (protoreflect.RawFields, error) {
	b, err := proto.Marshal(s)
	if err != nil {
		return nil, errors.Wrap(err, "cannot encode a desired object's Struct")
	}
	w := make([]byte, 0, protowire.SizeTag(resourceField)+protowire.SizeBytes(len(b)))
	w = protowire.AppendTag(w, resourceField, protowire.BytesType)
	return protoreflect.RawFields(slices.Clip(protowire.AppendBytes(w, b))), nil
}

// wireHeapBytes estimates the heap a cached encoding holds: its bytes, and
// its slot in the cache's wire map (a pointer and a slice header), with
// the map's slack (mapHeapBytes: groups at most seven eighths full).
func wireHeapBytes(w protoreflect.RawFields) int {
	slot := int(unsafe.Sizeof(uintptr(0))) + int(unsafe.Sizeof(w))
	return allocSize(len(w)) + slot*8/7
}
