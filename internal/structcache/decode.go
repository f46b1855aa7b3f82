package structcache

import (
	"bytes"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/crossplane/function-sdk-go/errors"
)

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
	return (*Cache)(nil).ToStruct(o)
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
