// Package fn is the function's gRPC handler: it reads one RunFunction
// request, hands a protobuf-free view of it to the composer for the
// composite's kind, and writes what the composer wants into the response.
package fn

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/crossplane/function-sdk-go/errors"
	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/response"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/route"
	"github.com/modelplaneai/function-inference-gateway/internal/structcache"
)

// Function composes InferenceGateways and ModelRoutes.
type Function struct {
	fnv1.UnimplementedFunctionRunnerServiceServer

	log       logging.Logger
	composers map[string]compose.Composer
	// structs builds the response's Structs and keeps them, encoded, from
	// one reconcile to the next; nil builds every one afresh.
	structs *structcache.Cache
	// now is the clock; tests set it.
	now func() time.Time
}

// New returns a Function that logs to log.
func New(log logging.Logger) *Function {
	return &Function{
		log:     log,
		structs: structcache.New(),
		now:     time.Now,
		// Dispatch is by kind alone, never by API group, so a platform team
		// can serve the XRDs under its own group.
		composers: map[string]compose.Composer{
			gateway.Kind: gateway.Composer{},
			route.Kind:   route.Composer{},
		},
	}
}

// RunFunction runs one reconcile of an InferenceGateway or a ModelRoute.
func (f *Function) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	log := f.log.WithValues("tag", req.GetMeta().GetTag())
	rsp := response.To(req, response.DefaultTTL)

	in, err := readInput(req)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}

	view, err := observe(req, in, f.now())
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	kind, _ := view.Composite["kind"].(string)
	md, _ := view.Composite["metadata"].(map[string]any)
	log = log.WithValues("xr-kind", kind, "xr-name", md["name"])

	c, ok := f.composers[kind]
	if !ok {
		response.Fatal(rsp, errors.Errorf("cannot compose a composite of kind %q: this function composes %s", kind, strings.Join(f.kinds(), " and ")))
		return rsp, nil
	}

	res, err := c.Compose(view)
	if err != nil {
		// Fatal stops Crossplane before it applies or garbage-collects
		// anything, so bad input never deletes what was composed.
		log.Info("Cannot compose", "error", err)
		response.Fatal(rsp, err)
		return rsp, nil
	}

	if err := write(req, rsp, view, res, f.structs); err != nil {
		log.Info("Cannot write the response", "error", err)
		response.Fatal(rsp, err)
		return rsp, nil
	}
	kv := []any{"resources", len(rsp.GetDesired().GetResources()), "ttl", rsp.GetMeta().GetTtl().AsDuration().String()}
	for _, c := range res.Conditions {
		kv = append(kv, c.Type, fmt.Sprintf("%t/%s", c.Status, c.Reason))
	}
	log.Debug("Composed", append(kv, res.Evidence...)...)
	return rsp, nil
}

func (f *Function) kinds() []string {
	ks := make([]string, 0, len(f.composers))
	for k := range f.composers {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
