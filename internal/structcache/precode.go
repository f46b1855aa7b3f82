package structcache

import (
	"slices"

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

// Precode replaces each desired composed resource's Struct that c holds
// with its encoding, made once when the Struct was cached.
//
// gRPC encodes the whole response on every call (grpc-go encoding/proto
// codecV2.Marshal: proto.Size, then MarshalAppend), walking every Value of
// every desired object, although on almost every reconcile they are the
// same Structs, from the cache. protobuf-go writes a message's unknown
// fields out as they are, after its known fields (internal/impl/encode.go,
// marshalAppendPointer), so a Resource whose resource field is nil and
// whose unknown fields hold that field's encoding is, on the wire, the
// same Resource: Crossplane decodes the Struct from it as from any other.
//
// A Struct the cache holds must reach a response only in a Resource made
// for it, with no unknown fields of its own to lose, as fn's write makes
// them. A Struct the cache no longer holds (it started again empty since)
// is left to gRPC to encode.
func (c *Cache) Precode(rsp *fnv1.RunFunctionResponse) {
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
