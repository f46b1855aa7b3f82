// Package decode turns the JSON-shaped data Crossplane sends (maps whose
// numbers are all float64, because the SDK goes through structpb) into typed
// Go values, with errors that name the field and say how to fix it.
package decode

import (
	"bytes"
	"encoding/json"
	stderrors "errors"
	"fmt"

	"github.com/crossplane/function-sdk-go/errors"
)

// Into decodes v, a map or other JSON-shaped value, into the typed value
// pointed to by into. what names the object for error messages, such as
// "InferenceGateway"; prefix is the path of v within it, such as "spec",
// and is empty for an object the user does not write.
//
// encoding/json writes a float64 that holds a whole number as an integer
// (1000000, not 1e+06), so counters and weights that arrive as float64 decode
// into int32 fields. A fraction or a string where an integer belongs is an
// error that names the field.
func Into(what, prefix string, v, into any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return errors.Wrapf(err, "cannot encode %s", what)
	}
	return bytesInto(what, prefix, b, into)
}

// bytesInto decodes JSON bytes into the typed value pointed to by into, like Into.
func bytesInto(what, prefix string, b []byte, into any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(into); err != nil {
		return fieldError(what, prefix, err)
	}
	return nil
}

// fieldError rewrites a JSON decoding error so that it names the field path,
// what was found there, and what was expected.
func fieldError(what, prefix string, err error) error {
	if te, ok := stderrors.AsType[*json.UnmarshalTypeError](err); ok {
		field := te.Field
		if prefix != "" && field != "" {
			field = prefix + "." + field
		}
		if field == "" {
			field = prefix
		}
		msg := fmt.Sprintf("cannot read %s: %s is a JSON %s, but must be %s", what, field, te.Value, describe(te.Type.Kind().String()))
		if prefix != "" {
			// Only the user's own object can be fixed by the user.
			msg += "; fix " + field
		}
		return errors.New(msg)
	}
	return errors.Wrapf(err, "cannot read %s", what)
}

func describe(kind string) string {
	switch kind {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "a whole number"
	case "float32", "float64":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "a list"
	case "map", "struct", "ptr":
		return "an object"
	default:
		return fmt.Sprintf("a %s", kind)
	}
}
