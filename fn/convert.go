package fn

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/crossplane/function-sdk-go/errors"
)

// maxCachedBytes bounds the JSON a structCache holds: about 1,600 routes of
// 16 backends. Past it the cache starts again empty.
const maxCachedBytes = 32 << 20

// structCache remembers the Struct built for each JSON encoding. A
// composite's desired objects are the same on almost every reconcile, and
// building a Struct costs several times more than encoding the typed object
// to JSON, which is the key. It holds no secret: API keys never reach a
// desired object (route.builder.credential).
//
// Why not the SDK's helpers (runtime.DefaultUnstructuredConverter into
// composed.Unstructured, response.SetDesiredComposedResources, which calls
// structpb.NewStruct, and request.GetObservedComposedResources, which
// converts every observed Object with AsMap): they build every Struct
// through maps and reflection on every call, several times the cost and
// allocations of this path (BenchmarkRunFunction). The Structs it returns are shared between
// responses and must never be changed: gRPC only reads them, and protobuf
// messages are safe to marshal from several goroutines at once.
type structCache struct {
	mu    sync.Mutex
	m     map[string]*structpb.Struct
	bytes int
}

func newStructCache() *structCache {
	return &structCache{m: map[string]*structpb.Struct{}}
}

// toStruct returns the Struct for o, building it on a miss. A nil cache
// builds every time.
func (c *structCache) toStruct(o any) (*structpb.Struct, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return decodeStruct(b)
	}
	c.mu.Lock()
	s, ok := c.m[string(b)]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	if s, err = decodeStruct(b); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.bytes+len(b) > maxCachedBytes {
		c.m, c.bytes = map[string]*structpb.Struct{}, 0
	}
	c.m[string(b)] = s
	c.bytes += len(b)
	c.mu.Unlock()
	return s, nil
}

// toStruct encodes a typed object as a protobuf Struct. encoding/json writes
// it by its json tags; the bytes are then read token by token straight into
// Struct and Value messages, with no intermediate map.
//
// This replaces protojson.Unmarshal, which builds the same Struct through
// protobuf reflection: BenchmarkToStruct measures the two side by side. Over
// gRPC the response is as costly to build as the objects in it, so this is
// the function's hot path.
func toStruct(o any) (*structpb.Struct, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	return decodeStruct(b)
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
