package structcache

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// TestPrecode checks that Precode sends as bytes exactly the desired
// composed resources whose Structs the cache holds, and that the response,
// once encoded and decoded as Crossplane decodes it, is the one it was
// given. fn's TestWire checks the same of the function's own responses.
func TestPrecode(t *testing.T) {
	small := obj{"apiVersion": "v1", "kind": "Namespace", "metadata": obj{"name": "ns"}}
	cases := map[string]struct {
		reason string
		// rsp returns the response to precode, its desired resources' Structs
		// made with c or otherwise.
		rsp func(t *testing.T, c *Cache) *fnv1.RunFunctionResponse
		// nilCache precodes with a nil Cache.
		nilCache bool
		// precoded names the desired resources that go out as bytes.
		precoded []string
	}{
		"Cached": {
			reason: "Every Struct the cache returned is sent as the bytes it was encoded to; Ready goes out as it was.",
			rsp: func(t *testing.T, c *Cache) *fnv1.RunFunctionResponse {
				return response(desired("route", cached(t, c, aiGatewayRoute(t)), fnv1.Ready_READY_TRUE), desired("ns", cached(t, c, small), fnv1.Ready_READY_FALSE))
			},
			precoded: []string{"ns", "route"},
		},
		"SameValueNotCached": {
			reason: "A Struct the cache did not return is sent as a Struct, though the cache holds one equal to it.",
			rsp: func(t *testing.T, c *Cache) *fnv1.RunFunctionResponse {
				cached(t, c, small)
				return response(desired("route", cached(t, c, aiGatewayRoute(t)), fnv1.Ready_READY_TRUE), desired("ns", built(t, small), fnv1.Ready_READY_TRUE))
			},
			precoded: []string{"route"},
		},
		"Evicted": {
			reason: "A Struct the cache held before it started again empty is sent as a Struct.",
			rsp: func(t *testing.T, c *Cache) *fnv1.RunFunctionResponse {
				route := cached(t, c, aiGatewayRoute(t))
				// Full: the next entry, smaller, empties the cache.
				c.limit = c.heap
				return response(desired("route", route, fnv1.Ready_READY_TRUE), desired("ns", cached(t, c, small), fnv1.Ready_READY_TRUE))
			},
			precoded: []string{"ns"},
		},
		"NilCache": {
			reason: "A nil Cache precodes nothing.",
			rsp: func(t *testing.T, c *Cache) *fnv1.RunFunctionResponse {
				return response(desired("route", cached(t, c, aiGatewayRoute(t)), fnv1.Ready_READY_TRUE))
			},
			nilCache: true,
		},
		"NoDesiredState": {
			reason: "A response that desires nothing, as a Fatal one, is left as it is.",
			rsp: func(*testing.T, *Cache) *fnv1.RunFunctionResponse {
				return &fnv1.RunFunctionResponse{Results: []*fnv1.Result{{Severity: fnv1.Severity_SEVERITY_FATAL, Message: "cannot compose"}}}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := New()
			rsp := tc.rsp(t, c)
			want := proto.CloneOf(rsp)
			if tc.nilCache {
				c = nil
			}
			c.Precode(rsp)

			var precoded []string
			for n, r := range rsp.GetDesired().GetResources() {
				if r.GetResource() == nil && len(r.ProtoReflect().GetUnknown()) > 0 {
					precoded = append(precoded, n)
				}
			}
			slices.Sort(precoded)
			if diff := cmp.Diff(tc.precoded, precoded); diff != "" {
				t.Errorf("%s\nPrecode(...): desired resources sent as bytes: -want, +got:\n%s", tc.reason, diff)
			}
			b, err := proto.Marshal(rsp)
			if err != nil {
				t.Fatalf("%s\ncannot encode the precoded response: %v", tc.reason, err)
			}
			decoded := &fnv1.RunFunctionResponse{}
			if err := proto.Unmarshal(b, decoded); err != nil {
				t.Fatalf("%s\ncannot decode the precoded response: %v", tc.reason, err)
			}
			if diff := cmp.Diff(want, decoded, protocmp.Transform()); diff != "" {
				t.Errorf("%s\nPrecode(...): decoded response: -given, +sent:\n%s", tc.reason, diff)
			}
		})
	}
}

// cached returns c's Struct for o.
func cached(t *testing.T, c *Cache, o obj) *structpb.Struct {
	t.Helper()
	s, err := c.ToStruct(o)
	if err != nil {
		t.Fatalf("cannot build the Struct of %v: %v", o["kind"], err)
	}
	return s
}

// built returns a Struct for o that is not c's.
func built(t *testing.T, o obj) *structpb.Struct {
	t.Helper()
	s, err := toStruct(o)
	if err != nil {
		t.Fatalf("cannot build the Struct of %v: %v", o["kind"], err)
	}
	return s
}

type namedResource struct {
	name string
	r    *fnv1.Resource
}

func desired(name string, s *structpb.Struct, ready fnv1.Ready) namedResource {
	return namedResource{name: name, r: &fnv1.Resource{Resource: s, Ready: ready}}
}

// response returns a response that desires rs and a composite with a
// status, which Precode leaves alone.
func response(rs ...namedResource) *fnv1.RunFunctionResponse {
	rsp := &fnv1.RunFunctionResponse{Desired: &fnv1.State{
		Composite: &fnv1.Resource{Resource: &structpb.Struct{Fields: map[string]*structpb.Value{
			"status": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"ready": structpb.NewBoolValue(true)}}),
		}}},
		Resources: map[string]*fnv1.Resource{},
	}}
	for _, r := range rs {
		rsp.Desired.Resources[r.name] = r.r
	}
	return rsp
}
