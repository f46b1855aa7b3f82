package decode

import (
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/crossplane/function-sdk-go/errors"
)

// appendJSON writes v as JSON, as encoding/json writes the value
// v.AsInterface() returns, but without building that value: the observed
// manifests reach the function as Structs, and converting one to maps only
// to encode it again allocates every value of it twice (docs/speed.md has
// the profile). A nil v is null. sorted writes each object's names in
// order, as encoding/json does, for the error messages of the slow path;
// the fast path does not need it.
//
// A string is always valid UTF-8, so AppendQuote, which refuses invalid
// UTF-8 where encoding/json would replace it, never errs on one here:
// protobuf-go refuses a proto3 string field that is not valid UTF-8 when
// it unmarshals the request (google.golang.org/protobuf
// internal/impl/codec_gen.go, consumeStringValidateUTF8), and
// struct.proto is proto3.
func appendJSON(b []byte, v *structpb.Value, sorted bool) ([]byte, error) {
	var err error
	switch k := v.GetKind().(type) {
	case nil, *structpb.Value_NullValue:
		return append(b, "null"...), nil
	case *structpb.Value_BoolValue:
		return strconv.AppendBool(b, k.BoolValue), nil
	case *structpb.Value_NumberValue:
		return appendNumber(b, k.NumberValue)
	case *structpb.Value_StringValue:
		return jsontext.AppendQuote(b, k.StringValue)
	case *structpb.Value_ListValue:
		b = append(b, '[')
		for i, e := range k.ListValue.GetValues() {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendJSON(b, e, sorted); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	case *structpb.Value_StructValue:
		return appendObject(b, k.StructValue, sorted)
	}
	return b, errors.Errorf("cannot encode a %T as JSON", v.GetKind())
}

func appendObject(b []byte, s *structpb.Struct, sorted bool) ([]byte, error) {
	fields := s.GetFields()
	var err error
	b = append(b, '{')
	// Two loops, not one over an iterator chosen between them: ranging
	// over the map directly allocates nothing, and this runs for every
	// object of every observed status on every reconcile.
	if sorted {
		for i, name := range slices.Sorted(maps.Keys(fields)) {
			if b, err = appendField(b, i > 0, name, fields[name], sorted); err != nil {
				return b, err
			}
		}
	} else {
		comma := false
		for name, v := range fields {
			if b, err = appendField(b, comma, name, v, sorted); err != nil {
				return b, err
			}
			comma = true
		}
	}
	return append(b, '}'), nil
}

// appendField writes one name and value of an object, after a comma
// unless it is the first.
func appendField(b []byte, comma bool, name string, v *structpb.Value, sorted bool) ([]byte, error) {
	if comma {
		b = append(b, ',')
	}
	b, err := jsontext.AppendQuote(b, name)
	if err != nil {
		return b, err
	}
	return appendJSON(append(b, ':'), v, sorted)
}

// appendNumber writes f as encoding/json writes a float64 (Go's
// encoding/json/encode.go, floatEncoder.encode): without an exponent from 1e-6 up to 1e21, so that a whole
// number decodes into an integer field, and an error for what JSON cannot
// hold.
func appendNumber(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, errors.Errorf("cannot encode the number %v as JSON", f)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9, as encoding/json writes it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}
