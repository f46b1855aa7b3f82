package fn

import (
	"time"

	"github.com/crossplane/function-sdk-go/errors"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/decode"
	"github.com/modelplaneai/function-inference-gateway/internal/input/v1beta1"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
)

// readInput reads the optional Input and fills in its defaults.
func readInput(req *fnv1.RunFunctionRequest) (*v1beta1.Input, error) {
	in := &v1beta1.Input{}
	if s := req.GetInput(); s != nil {
		// decode names the field and says the same words on every call:
		// the SDK's request.GetInput goes through the unstructured
		// converter, whose error for a wrong type depends on which field
		// Go's map order meets first.
		if err := decode.Strict("the function Input", "input", s.AsMap(), in, "apiVersion", "kind", "metadata"); err != nil {
			return nil, err
		}
	}
	in = in.WithDefaults()
	if err := in.Validate(); err != nil {
		return nil, err
	}
	return in, nil
}

// observe converts the request into the composer's view, once.
func observe(req *fnv1.RunFunctionRequest, in *v1beta1.Input, now time.Time) (compose.Request, error) {
	v := compose.Request{
		Now:       now,
		Input:     in,
		Composite: req.GetObserved().GetComposite().GetResource().AsMap(),
		Observed:  make(map[string]remote.Observed, len(req.GetObserved().GetResources())),
		Required:  map[string][]map[string]any{},
	}
	// Of several malformed resources, the first by name is reported, not
	// the first met: Go's map order changes from call to call, and the
	// Fatal message would change with it on every reconcile.
	var bad string
	var badErr error
	for name, r := range req.GetObserved().GetResources() {
		o, err := remote.Read(r.GetResource())
		if err != nil {
			if badErr == nil || name < bad {
				bad, badErr = name, err
			}
			continue
		}
		v.Observed[name] = o
	}
	if badErr != nil {
		return v, errors.Wrapf(badErr, "cannot read the observed composed resource %q", bad)
	}
	// Required resources are read straight from their Structs. The SDK's
	// request.GetRequiredResources does the same AsMap (function-sdk-go
	// v0.7.1 resource.AsObject takes the unstructured path, no JSON);
	// this only skips building an Unstructured around each map.
	for name, rs := range req.GetRequiredResources() {
		list := make([]map[string]any, len(rs.GetItems()))
		for i, it := range rs.GetItems() {
			list[i] = it.GetResource().AsMap()
		}
		v.Required[name] = list
	}
	return v, nil
}
