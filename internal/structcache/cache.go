// Package structcache builds the protobuf Structs of the objects a
// RunFunction response holds, and remembers each, beside its protobuf
// encoding as a Resource's resource field, for the next reconcile: a
// composite's desired objects and status are the same on almost every
// reconcile. Precode sends the cached ones in the response already encoded
// (fn's Function.Wire).
package structcache

import (
	"bytes"
	"encoding/json"
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// maxCachedHeap bounds the heap a Cache holds, as heapBytes estimates it;
// past it the cache starts again empty. Go's default GOGC of 100 lets the
// heap grow to twice what is live before a collection, so at the peak the
// cache may take twice this: a quarter of the 512Mi memory limit that
// deploy/control-plane/function.yaml's runtime config sets, the rest left
// to the requests in flight.
const maxCachedHeap = 64 << 20

// Cache remembers the Struct built for each JSON encoding. A composite's
// desired objects are the same on almost every reconcile, and building a
// Struct costs several times more than encoding the typed object to JSON,
// which is the key (fn's BenchmarkRunFunction against
// BenchmarkRunFunctionUncached). It holds the composite's status too, and
// beside each Struct its protobuf encoding, for Precode. It holds no
// secret: API keys never reach a desired object (route.builder.credential)
// or a status, and private keys neither.
//
// Why not the SDK's helpers (runtime.DefaultUnstructuredConverter into
// composed.Unstructured, response.SetDesiredComposedResources, which calls
// structpb.NewStruct, and request.GetObservedComposedResources, which
// converts every observed Object with AsMap): they build every Struct
// through maps and reflection on every call, several times the cost and
// allocations of this path (fn's BenchmarkRunFunction). The Structs it
// returns are shared between responses and must never be changed: gRPC
// only reads them, and protobuf messages are safe to marshal from several
// goroutines at once.
//
// A nil Cache builds every Struct afresh and precodes nothing.
type Cache struct {
	mu sync.Mutex
	m  map[string]*structpb.Struct
	// wire holds each Struct of m encoded as a Resource's resource field,
	// for Precode (precode.go).
	wire map[*structpb.Struct]protoreflect.RawFields
	// heap is what the entries hold, as heapBytes and wireHeapBytes
	// estimate it; limit bounds it.
	heap, limit int
}

// New returns an empty Cache that holds at most maxCachedHeap bytes of
// heap, as estimated.
func New() *Cache {
	return &Cache{m: map[string]*structpb.Struct{}, wire: map[*structpb.Struct]protoreflect.RawFields{}, limit: maxCachedHeap}
}

// ToStruct returns the Struct for o, building it on a miss as toStruct
// does. A nil Cache builds every time.
func (c *Cache) ToStruct(o any) (*structpb.Struct, error) {
	buf, _ := keys.Get().(*bytes.Buffer)
	// The key is looked up without a copy (Go's compiler does not
	// allocate for a map index by string(b)), so the buffer is free
	// again after; only a new entry copies it.
	defer keys.Put(buf)
	buf.Reset()
	// What json.Marshal writes, with a newline after it, into a buffer
	// that is used again rather than a new slice for every object.
	if err := json.NewEncoder(buf).Encode(o); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	if c == nil {
		return decodeStruct(b)
	}
	c.mu.Lock()
	s, ok := c.m[string(b)]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := decodeStruct(b)
	if err != nil {
		return nil, err
	}
	w, err := encodeResourceField(s)
	if err != nil {
		return nil, err
	}
	n := heapBytes(len(b), s) + wireHeapBytes(w)
	c.mu.Lock()
	if c.heap+n > c.limit {
		c.m, c.wire, c.heap = map[string]*structpb.Struct{}, map[*structpb.Struct]protoreflect.RawFields{}, 0
	}
	if n <= c.limit {
		c.m[string(b)] = s
		c.wire[s] = w
		c.heap += n
	}
	c.mu.Unlock()
	return s, nil
}

// keys holds the buffers ToStruct encodes each object's key into.
var keys = sync.Pool{New: func() any { return new(bytes.Buffer) }}
