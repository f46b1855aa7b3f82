// Package decode turns the JSON-shaped data Crossplane sends (maps whose
// numbers are all float64, because the SDK goes through structpb) into typed
// Go values, with errors that name the field and say how to fix it.
package decode

import (
	"bytes"
	"encoding/json"
	stderrors "errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"google.golang.org/protobuf/types/known/structpb"

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
//
// v may also be a *structpb.Value or *structpb.Struct, as the function
// receives an observed manifest: it is then encoded straight from the
// protobuf message, with no map built (appendJSON), to the same effect.
func Into(what, prefix string, v, into any) error {
	switch x := v.(type) {
	case *structpb.Value:
		return valueInto(what, prefix, x, into)
	case *structpb.Struct:
		if x == nil {
			return valueInto(what, prefix, nil, into)
		}
		return valueInto(what, prefix, structpb.NewStructValue(x), into)
	}
	if fastInto(v, into) {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return errors.Wrapf(err, "cannot encode %s", what)
	}
	return bytesInto(what, prefix, b, into)
}

// v1 are go-json-experiment/json's options that make it encode and decode
// as encoding/json does (its v1 package's DefaultOptionsV1: case-insensitive
// names, the legacy omitempty and merge rules, MarshalJSON and
// UnmarshalJSON methods). The encoding need not be deterministic: only
// fastInto reads it.
var v1 = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv2.Deterministic(false))

// fastInto decodes v as Into does, through go-json-experiment/json
// with encoding/json's semantics (v1), whose encoder and decoder allocate
// far less than encoding/json's: the observed statuses and Deployment the
// composers read are decoded on every reconcile (docs/speed.md has the
// profile). It reports whether it succeeded; if not, it has put into back
// as it was, so that Into can decode again with encoding/json, whose
// errors fieldError words for the user.
func fastInto(v, into any) bool {
	b, err := jsonv2.Marshal(v, v1)
	if err != nil {
		return false
	}
	return fastBytesInto(b, into)
}

// fastBytesInto decodes b into the typed value pointed to by into through
// go-json-experiment/json with encoding/json's semantics, and reports
// whether it succeeded; if not, it has put into back as it was.
func fastBytesInto(b []byte, into any) bool {
	rv := reflect.ValueOf(into)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return false
	}
	was := reflect.New(rv.Elem().Type()).Elem()
	was.Set(rv.Elem())
	if err := jsonv2.Unmarshal(b, into, v1); err != nil {
		rv.Elem().Set(was)
		return false
	}
	return true
}

// valueInto is Into for a protobuf Value: fast through go-json-experiment
// as fastInto, or, should that fail, again through encoding/json from the
// names in order, as Into does from a map, so that the error is the one
// the map would have given.
func valueInto(what, prefix string, v *structpb.Value, into any) error {
	buf, _ := buffers.Get().(*[]byte)
	// Decoding copies what it keeps, so the buffer is free again after.
	defer buffers.Put(buf)
	b, err := appendJSON((*buf)[:0], v, false)
	*buf = b
	if err != nil {
		return errors.Wrapf(err, "cannot encode %s", what)
	}
	if fastBytesInto(b, into) {
		return nil
	}
	b, err = appendJSON(b[:0], v, true)
	*buf = b
	if err != nil {
		return errors.Wrapf(err, "cannot encode %s", what)
	}
	return bytesInto(what, prefix, b, into)
}

// buffers holds the byte slices valueInto encodes into, so that a
// reconcile's many small decodes do not each grow a new one.
var buffers = sync.Pool{New: func() any { return new([]byte) }}

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

// CrossplaneSpecField is the field of a composite's spec that Crossplane v2
// adds for its own use, with compositionRef, resourceRefs and the like in
// it (crossplane v2.2.0 internal/xcrd/schemas.go,
// CompositeResourceSpecProps). Functions must tolerate it.
const CrossplaneSpecField = "crossplane"

// Strict decodes v into the typed value pointed to by into, like Into, but
// first fails on a field of v that into's type does not have, naming its
// path: a field the function does not know would otherwise be dropped
// without a word, and the user would believe it took effect. The API server
// prunes such fields from an XR already, but crossplane render does not
// validate the XR against its XRD. tolerate names top-level fields of v
// that are not the user's, such as the spec.crossplane that Crossplane v2
// adds to every composite (crossplane v2.2.0 internal/xcrd/schemas.go,
// CompositeResourceSpecProps).
//
// Field names match exactly, as in the API server, not case-insensitively
// as encoding/json matches them.
func Strict(what, prefix string, v, into any, tolerate ...string) error {
	if m, ok := v.(map[string]any); ok && len(tolerate) > 0 {
		kept := make(map[string]any, len(m))
		for k, x := range m {
			if !slices.Contains(tolerate, k) {
				kept[k] = x
			}
		}
		v = kept
	}
	if f := unknownField(v, reflect.TypeOf(into), prefix); f != "" {
		return errors.Errorf("cannot read %s: %s is not a field of %s; remove it, or check its spelling against its schema", what, f, what)
	}
	return Into(what, prefix, v, into)
}

// unmarshaler is a type that decodes itself from JSON, such as
// resource.Quantity or metav1.Time: its fields are not JSON fields.
var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// unknownField returns the path of the first field of v, in sorted order,
// that t has no JSON field for, or "" when there is none. A value of the
// wrong shape for t is left to the decoder, which names it better.
func unknownField(v any, t reflect.Type, path string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshaler) {
		return ""
	}
	switch x := v.(type) {
	case map[string]any:
		return unknownInObject(x, t, path)
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, e := range x {
				if f := unknownField(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); f != "" {
					return f
				}
			}
		}
	}
	return ""
}

// unknownInObject is unknownField for a JSON object, which t decodes as a
// map (any key is known) or a struct (only its JSON fields are).
func unknownInObject(x map[string]any, t reflect.Type, path string) string {
	var fields map[string]reflect.Type
	switch t.Kind() {
	case reflect.Map:
	case reflect.Struct:
		fields = fieldsOf(t)
	default:
		return ""
	}
	for _, k := range slices.Sorted(maps.Keys(x)) {
		p := k
		if path != "" {
			p = path + "." + k
		}
		var ft reflect.Type
		switch f, ok := fields[k]; {
		case t.Kind() == reflect.Map:
			ft = t.Elem()
		case ok:
			ft = f
		default:
			return p
		}
		if f := unknownField(x[k], ft, p); f != "" {
			return f
		}
	}
	return ""
}

// fieldsByType holds jsonFields of each struct type Strict has walked:
// the same spec types, on every reconcile.
var fieldsByType sync.Map

// fieldsOf is jsonFields(t), computed once per type. The map is shared:
// read it, never change it.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldsByType.Load(t); ok {
		m, _ := f.(map[string]reflect.Type)
		return m
	}
	f := jsonFields(t)
	fieldsByType.Store(t, f)
	return f
}

// jsonFields returns the types of a struct's JSON fields by name, with the
// fields of embedded structs that have no name of their own, as
// encoding/json sees them.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				maps.Copy(out, jsonFields(ft))
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
