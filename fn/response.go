package fn

import (
	"encoding/json"
	"sort"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/crossplane/function-sdk-go/errors"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
)

// write puts the composer's result into the response: desired composed
// resources (built, then carried forward), the composite's status,
// readiness and conditions, warnings and requirements.
func write(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, view compose.Request, res *compose.Result) error {
	if rsp.Desired == nil {
		rsp.Desired = &fnv1.State{}
	}
	if rsp.Desired.Resources == nil {
		rsp.Desired.Resources = map[string]*fnv1.Resource{}
	}
	for name, d := range res.Resources {
		s, err := toStruct(d.Object)
		if err != nil {
			return errors.Wrapf(err, "cannot encode the desired composed resource %q", name)
		}
		rsp.Desired.Resources[name] = &fnv1.Resource{Resource: s, Ready: ready(d.Ready)}
	}
	if err := carryForward(req, rsp, view, res); err != nil {
		return err
	}

	if err := writeComposite(req, rsp, res); err != nil {
		return err
	}
	for _, c := range res.Conditions {
		var co *response.ConditionOption
		if c.Status {
			co = response.ConditionTrue(rsp, c.Type, c.Reason)
		} else {
			co = response.ConditionFalse(rsp, c.Type, c.Reason)
		}
		co.WithMessage(c.Message).TargetCompositeAndClaim()
	}
	for _, w := range res.Warnings {
		response.Warning(rsp, errors.New(w)).TargetCompositeAndClaim()
	}
	writeRequirements(rsp, res.Requirements)
	return nil
}

// carryForward keeps every observed composed resource that the spec still
// implies but the composer could not build this time, from its observed
// desired parts. Crossplane deletes every composed resource a function
// stops desiring (composition_functions.go, the garbage collector), so
// without this a missing input would take a model offline.
func carryForward(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, view compose.Request, res *compose.Result) error {
	for name, r := range req.GetObserved().GetResources() {
		if !res.Implied[name] {
			continue
		}
		if _, built := res.Resources[name]; built {
			continue
		}
		if _, desired := rsp.Desired.Resources[name]; desired {
			continue
		}
		s, err := structpb.NewStruct(remote.Carry(r.GetResource().AsMap()))
		if err != nil {
			return errors.Wrapf(err, "cannot carry forward the observed composed resource %q", name)
		}
		o := view.Observed[name]
		rsp.Desired.Resources[name] = &fnv1.Resource{Resource: s, Ready: ready(o.Live() && o.Ready.True())}
	}
	return nil
}

// writeComposite merges the composer's status into the desired composite
// and sets its readiness. Crossplane honours only the status of a desired
// composite.
func writeComposite(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, res *compose.Result) error {
	dxr, err := request.GetDesiredCompositeResource(req)
	if err != nil {
		return errors.Wrap(err, "cannot read the desired composite resource")
	}
	if res.Status != nil {
		b, err := json.Marshal(res.Status)
		if err != nil {
			return errors.Wrap(err, "cannot encode the composite's status")
		}
		st := map[string]any{}
		if err := json.Unmarshal(b, &st); err != nil {
			return errors.Wrap(err, "cannot decode the composite's status")
		}
		cur, _ := dxr.Resource.Object["status"].(map[string]any)
		if cur == nil {
			cur = map[string]any{}
		}
		for k, v := range st {
			cur[k] = v
		}
		dxr.Resource.Object["status"] = cur
	}
	if !res.Ready {
		dxr.Ready = resource.ReadyFalse
	}
	return errors.Wrap(response.SetDesiredCompositeResource(rsp, dxr), "cannot set the desired composite resource")
}

// writeRequirements asks Crossplane for the required resources. The
// requirements go out on every call: Crossplane calls the function again
// until they stop changing.
func writeRequirements(rsp *fnv1.RunFunctionResponse, reqs map[string]compose.Requirement) {
	if len(reqs) == 0 {
		return
	}
	rsp.Requirements = &fnv1.Requirements{Resources: make(map[string]*fnv1.ResourceSelector, len(reqs))}
	keys := make([]string, 0, len(reqs))
	for k := range reqs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r := reqs[k]
		sel := &fnv1.ResourceSelector{
			ApiVersion: r.APIVersion,
			Kind:       r.Kind,
			Match:      &fnv1.ResourceSelector_MatchName{MatchName: r.Name},
		}
		if r.Namespace != "" {
			ns := r.Namespace
			sel.Namespace = &ns
		}
		rsp.Requirements.Resources[k] = sel
	}
}

// toStruct encodes a typed object as a protobuf Struct in one pass:
// encoding/json, then protojson straight into the Struct, with no
// intermediate map.
func toStruct(o any) (*structpb.Struct, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	s := &structpb.Struct{}
	return s, protojson.Unmarshal(b, s)
}

func ready(r bool) fnv1.Ready {
	if r {
		return fnv1.Ready_READY_TRUE
	}
	return fnv1.Ready_READY_FALSE
}
