package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// toJSON prints a resource as protojson, with its @type and the proto
// field names Envoy's documentation uses, as a JSON value.
func toJSON(a *anypb.Any) (map[string]any, error) {
	m, err := a.UnmarshalNew()
	if err != nil {
		return map[string]any{"@type": a.GetTypeUrl(), "unresolved": true}, nil
	}
	if err := resolveAnys(m.ProtoReflect()); err != nil {
		return nil, err
	}
	packed, err := anypb.New(m)
	if err != nil {
		return nil, err
	}
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(packed)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	return out, json.Unmarshal(b, &out)
}

// resolveAnys replaces every nested Any whose type is not linked into
// this binary by a Struct that names the type, so that one missing import
// does not fail a whole dump: protojson refuses an Any it cannot resolve.
func resolveAnys(m protoreflect.Message) error {
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			return true
		}
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = resolveOne(l.Get(i).Message())
			}
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					err = resolveOne(mv.Message())
					return err == nil
				})
			}
		default:
			err = resolveOne(v.Message())
		}
		return err == nil
	})
	return err
}

// resolveOne resolves m if it is an Any, and descends into it.
func resolveOne(m protoreflect.Message) error {
	a, ok := m.Interface().(*anypb.Any)
	if !ok {
		return resolveAnys(m)
	}
	if _, err := protoregistry.GlobalTypes.FindMessageByURL(a.GetTypeUrl()); err != nil {
		s, err := structpb.NewStruct(map[string]any{"unresolved_type": a.GetTypeUrl()})
		if err != nil {
			return err
		}
		b, err := proto.Marshal(s)
		if err != nil {
			return err
		}
		a.TypeUrl, a.Value = "type.googleapis.com/google.protobuf.Struct", b
		return nil
	}
	inner, err := a.UnmarshalNew()
	if err != nil {
		return fmt.Errorf("cannot decode an Any of %s: %w", a.GetTypeUrl(), err)
	}
	if err := resolveAnys(inner.ProtoReflect()); err != nil {
		return err
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(inner)
	if err != nil {
		return err
	}
	a.Value = b
	return nil
}

// Redacted stands for every key and secret value in a dump.
const Redacted = "<redacted>"

// secretFields are fields that hold key material or secrets wherever they
// are: a TLS private key, an SDS generic secret, passwords, OAuth2 and
// HMAC secrets, session ticket keys, basic-auth users.
var secretFields = map[string]bool{
	"private_key": true, "generic_secret": true, "password": true, "client_secret": true,
	"hmac_secret": true, "token_secret": true, "session_ticket_keys": true, "users": true,
	"private_key_provider": true, "pkcs12": true,
}

// redact replaces key material in a decoded resource. An api_key_auth
// credential is an object with "client" and "key"; its key is redacted and
// its client kept.
func redact(v any) any {
	switch x := v.(type) {
	case map[string]any:
		_, client := x["client"]
		for k, e := range x {
			switch {
			case secretFields[k]:
				x[k] = Redacted
			case k == "key" && client:
				x[k] = Redacted
			case strings.HasSuffix(k, "_secret"):
				x[k] = Redacted
			default:
				x[k] = redact(e)
			}
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = redact(e)
		}
		return x
	}
	return v
}
