package fn

import (
	"bytes"
	"encoding/json"
	"sync"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/crossplane/function-sdk-go/errors"
)

// maxCachedHeap bounds the heap a structCache holds, as heapBytes estimates
// it; past it the cache starts again empty. Go's default GOGC of 100 lets
// the heap grow to twice what is live before a collection, so at the peak
// the cache may take twice this: a quarter of the 512Mi memory limit that
// deploy/control-plane/function.yaml's runtime config sets, the rest left
// to the requests in flight.
const maxCachedHeap = 64 << 20

// structCache remembers the Struct built for each JSON encoding. A
// composite's desired objects are the same on almost every reconcile, and
// building a Struct costs several times more than encoding the typed object
// to JSON, which is the key (BenchmarkRunFunction against
// BenchmarkRunFunctionUncached). It holds the composite's status too, and
// beside each Struct its protobuf encoding, for Wire. It holds no secret: API keys never reach a desired object
// (route.builder.credential) or a status, and private keys neither.
//
// Why not the SDK's helpers (runtime.DefaultUnstructuredConverter into
// composed.Unstructured, response.SetDesiredComposedResources, which calls
// structpb.NewStruct, and request.GetObservedComposedResources, which
// converts every observed Object with AsMap): they build every Struct
// through maps and reflection on every call, several times the cost and
// allocations of this path (BenchmarkRunFunction). The Structs it returns
// are shared between responses and must never be changed: gRPC only reads
// them, and protobuf messages are safe to marshal from several goroutines
// at once.
type structCache struct {
	mu sync.Mutex
	m  map[string]*structpb.Struct
	// wire holds each Struct of m encoded as a Resource's resource field,
	// for precode (wire.go).
	wire map[*structpb.Struct]protoreflect.RawFields
	// heap is what the entries hold, as heapBytes and wireHeapBytes
	// estimate it; limit bounds it.
	heap, limit int
}

func newStructCache() *structCache {
	return &structCache{m: map[string]*structpb.Struct{}, wire: map[*structpb.Struct]protoreflect.RawFields{}, limit: maxCachedHeap}
}

// toStruct returns the Struct for o, building it on a miss. A nil cache
// builds every time.
func (c *structCache) toStruct(o any) (*structpb.Struct, error) {
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

// keys holds the buffers toStruct encodes each object's key into.
var keys = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// Heap sizes of the messages a Struct is made of (protobuf-go's generated
// structs, google.golang.org/protobuf/types/known/structpb), and of one map
// slot of a Struct's fields: a string header and a pointer.
var (
	sizeStruct    = int(unsafe.Sizeof(structpb.Struct{}))
	sizeValue     = int(unsafe.Sizeof(structpb.Value{}))
	sizeListValue = int(unsafe.Sizeof(structpb.ListValue{}))
	sizeMapSlot   = int(unsafe.Sizeof("")) + int(unsafe.Sizeof(uintptr(0)))
)

// heapBytes estimates the heap one cache entry holds: its key of keyLen
// bytes and every message, map, list and string of s, each allocation
// rounded up as Go's allocator rounds it (allocSize). Go's maps keep
// groups of eight slots and a control word, at most seven eighths full
// (Go 1.24's Swiss tables, internal/runtime/maps), with a header of their
// own.
func heapBytes(keyLen int, s *structpb.Struct) int {
	return allocSize(keyLen) + allocSize(sizeMapSlot) + structHeapBytes(s)
}

func structHeapBytes(s *structpb.Struct) int {
	n := allocSize(sizeStruct) + mapHeapBytes(len(s.GetFields()))
	for k, v := range s.GetFields() {
		n += allocSize(len(k)) + valueHeapBytes(v)
	}
	return n
}

func valueHeapBytes(v *structpb.Value) int {
	n := allocSize(sizeValue)
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		n += allocSize(int(unsafe.Sizeof(*k))) + allocSize(len(k.StringValue))
	case *structpb.Value_StructValue:
		n += allocSize(int(unsafe.Sizeof(*k))) + structHeapBytes(k.StructValue)
	case *structpb.Value_ListValue:
		l := k.ListValue.GetValues()
		n += allocSize(int(unsafe.Sizeof(*k))) + allocSize(sizeListValue) + allocSize(cap(l)*int(unsafe.Sizeof(v)))
		for _, e := range l {
			n += valueHeapBytes(e)
		}
	default:
		// A number, a bool or a null: one word in its oneof wrapper.
		n += allocSize(8)
	}
	return n
}

// mapHeapBytes estimates a map[string]*structpb.Value of n entries.
func mapHeapBytes(n int) int {
	const header, group = 48, 8
	groupBytes := 8 + group*sizeMapSlot
	if n == 0 {
		return allocSize(header)
	}
	if n <= group {
		return allocSize(header) + allocSize(groupBytes)
	}
	groups := 1
	for groups*group*7/8 < n {
		groups *= 2
	}
	return allocSize(header) + allocSize(groups*groupBytes) + allocSize(64)
}

// allocSize rounds n up roughly as Go's size classes do
// (runtime/sizeclasses.go): to 8 bytes up to 16, to 16 up to 256, then to a
// sixteenth of the power of two at or above it.
func allocSize(n int) int {
	switch {
	case n <= 0:
		return 0
	case n <= 16:
		return (n + 7) &^ 7
	case n <= 256:
		return (n + 15) &^ 15
	}
	p := 512
	for p < n {
		p *= 2
	}
	q := p / 16
	return (n + q - 1) / q * q
}

// toStruct encodes a typed object as a protobuf Struct. encoding/json writes
// it by its json tags; the bytes are then read token by token straight into
// Struct and Value messages, with no intermediate map.
//
// Not protojson.Unmarshal, which builds the same Struct through protobuf
// reflection, more slowly: BenchmarkToStruct measures the two side by side. Over
// gRPC the response is as costly to build as the objects in it, so this is
// the function's hot path. It is the struct cache's build, without the
// cache.
func toStruct(o any) (*structpb.Struct, error) {
	return (*structCache)(nil).toStruct(o)
}

func decodeStruct(b []byte) (*structpb.Struct, error) {
	// encoding/json never writes a name twice in an object, so checking
	// for duplicates is wasted work.
	d := jsontext.NewDecoder(bytes.NewReader(b), jsontext.AllowDuplicateNames(true))
	v, err := decodeValue(d)
	if err != nil {
		return nil, err
	}
	s := v.GetStructValue()
	if s == nil {
		return nil, errors.New("cannot encode a value that is not a JSON object as a Struct")
	}
	return s, nil
}

// decodeValue reads one JSON value. Numbers become doubles, as in any
// Struct.
func decodeValue(d *jsontext.Decoder) (*structpb.Value, error) {
	tok, err := d.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case '{':
		s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
		for d.PeekKind() != '}' {
			k, err := d.ReadToken()
			if err != nil {
				return nil, err
			}
			// A token is only valid until the next read.
			key := k.String()
			v, err := decodeValue(d)
			if err != nil {
				return nil, err
			}
			s.Fields[key] = v
		}
		if _, err := d.ReadToken(); err != nil {
			return nil, err
		}
		return structpb.NewStructValue(s), nil
	case '[':
		l := &structpb.ListValue{}
		for d.PeekKind() != ']' {
			v, err := decodeValue(d)
			if err != nil {
				return nil, err
			}
			l.Values = append(l.Values, v)
		}
		if _, err := d.ReadToken(); err != nil {
			return nil, err
		}
		return structpb.NewListValue(l), nil
	case '"':
		return structpb.NewStringValue(tok.String()), nil
	case '0':
		return structpb.NewNumberValue(tok.Float()), nil
	case 't', 'f':
		return structpb.NewBoolValue(tok.Bool()), nil
	case 'n':
		return structpb.NewNullValue(), nil
	}
	return nil, errors.Errorf("cannot decode JSON token %v", tok)
}
