package fn

import (
	"maps"
	"sort"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/crossplane/function-sdk-go/errors"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/response"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
	"github.com/modelplaneai/function-inference-gateway/internal/structcache"
)

// notReadyTTL is the response TTL while the composite's condition is False;
// once it is True the SDK's default of one minute applies.
//
// With realtime compositions (beta, on by default) Crossplane requeues an
// XR after the shortest TTL its pipeline returned (crossplane v2.2.0 and v2.3.0,
// internal/controller/apiextensions/composite/reconciler.go). Watch events
// are not enough to follow a rollout promptly: each XR kind's circuit
// breaker (internal/circuit) opens within a second of an InferenceGateway's
// creation, because its watched envoy-deployment Object changes many times
// during a rollout, and then lets an event through only every 30 s; and a
// ModelRoute learns of its InferenceGateway only through required
// resources, which Crossplane does not watch. The one-minute default TTL
// would then leave a finished rollout unnoticed for up to a minute; a
// shorter TTL while not ready bounds that lag at a few reconciles a minute
// per unready composite, each a no-op apply.
const notReadyTTL = 15 * time.Second

// write puts the composer's result into the response: desired composed
// resources (built, then carried forward), the composite's status,
// readiness and conditions, warnings and requirements, and the TTL.
func write(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, view compose.Request, res *compose.Result, structs *structcache.Cache) error {
	if rsp.Desired == nil {
		rsp.Desired = &fnv1.State{}
	}
	if rsp.Desired.Resources == nil {
		rsp.Desired.Resources = map[string]*fnv1.Resource{}
	}
	for name, d := range res.Resources {
		s, err := structs.ToStruct(d.Object)
		if err != nil {
			return errors.Wrapf(err, "cannot encode the desired composed resource %q", name)
		}
		rsp.Desired.Resources[name] = &fnv1.Resource{Resource: s, Ready: ready(d.Ready)}
	}
	if err := carryForward(req, rsp, view, res); err != nil {
		return err
	}

	if err := writeComposite(rsp, res, structs); err != nil {
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
	for _, n := range res.Notices {
		response.Normal(rsp, n).TargetCompositeAndClaim()
	}
	writeRequirements(rsp, res.Requirements)
	switch {
	case res.RequeueAfter > 0:
		rsp.Meta.Ttl = durationpb.New(res.RequeueAfter)
	case !res.Ready:
		rsp.Meta.Ttl = durationpb.New(notReadyTTL)
	}
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
// composite. It sets the status fields on the desired Struct in place
// rather than converting the whole desired composite to a map and back
// with request.GetDesiredCompositeResource and
// response.SetDesiredCompositeResource (AsMap and NewStruct; no JSON).
// The status's Struct comes from structs like the desired objects': a
// composite's status is the same on most reconciles. Its fields are copied
// into the desired composite's status, never changed.
func writeComposite(rsp *fnv1.RunFunctionResponse, res *compose.Result, structs *structcache.Cache) error {
	if rsp.Desired.Composite == nil {
		rsp.Desired.Composite = &fnv1.Resource{}
	}
	dxr := rsp.Desired.Composite
	if dxr.Resource == nil {
		dxr.Resource = &structpb.Struct{Fields: map[string]*structpb.Value{}}
	}
	if res.Status != nil {
		st, err := structs.ToStruct(res.Status)
		if err != nil {
			return errors.Wrap(err, "cannot encode the composite's status")
		}
		cur := dxr.Resource.GetFields()["status"].GetStructValue()
		if cur == nil {
			cur = &structpb.Struct{Fields: map[string]*structpb.Value{}}
			dxr.Resource.Fields["status"] = structpb.NewStructValue(cur)
		}
		maps.Copy(cur.Fields, st.GetFields())
	}
	if !res.Ready {
		dxr.Ready = fnv1.Ready_READY_FALSE
	}
	return nil
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
		sel := &fnv1.ResourceSelector{ApiVersion: r.APIVersion, Kind: r.Kind}
		if r.Name != "" {
			sel.Match = &fnv1.ResourceSelector_MatchName{MatchName: r.Name}
		} else {
			sel.Match = &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: r.MatchLabels}}
		}
		if r.Name == "" {
			// An empty label set selects every resource of the kind: Crossplane
			// lists with client.MatchingLabels of the set (crossplane v2.2.0 and v2.3.0
			// internal/xfn/required_resources.go,
			// ExistingRequiredResourcesFetcher.Fetch), and crossplane render
			// matches labels.SelectorFromSet of it, which matches everything,
			// but only when MatchLabels is set at all (cmd/crank/render/
			// render.go, FilteringFetcher.Fetch). So MatchLabels is never nil.
			labels := r.MatchLabels
			if labels == nil {
				labels = map[string]string{}
			}
			sel.Match = &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: labels}}
		}
		if r.Namespace != "" {
			ns := r.Namespace
			sel.Namespace = &ns
		}
		rsp.Requirements.Resources[k] = sel
	}
}

func ready(r bool) fnv1.Ready {
	if r {
		return fnv1.Ready_READY_TRUE
	}
	return fnv1.Ready_READY_FALSE
}
