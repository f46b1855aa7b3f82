package fn

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// A small model of Crossplane and provider-kubernetes acting on one
// composed Object between two reconciles, for tests that feed one
// reconcile's desired state back as the next one's observed state.

// applyDesired is the observed Object under name after Crossplane applied
// the desired resource from rsp: its spec is the desired one, and the API
// server bumps metadata.generation when the spec changed. Its status stays
// as the provider left it. prev nil is an Object Crossplane creates now.
func applyDesired(t testing.TB, prev obj, rsp *fnv1.RunFunctionResponse, name string) obj {
	t.Helper()
	d := rsp.GetDesired().GetResources()[name]
	if d == nil {
		t.Fatalf("%s is not desired", name)
	}
	spec := d.GetResource().AsMap()["spec"].(obj)
	if prev == nil {
		o := object(name, nil, false, false)
		o["spec"] = spec
		return o
	}
	o := mustStruct(t, prev).AsMap()
	if !cmp.Equal(o["spec"], spec) {
		md := o["metadata"].(obj)
		md["generation"] = md["generation"].(float64) + 1
	}
	o["spec"] = spec
	return o
}

// providerSyncs is the Object after provider-kubernetes reconciled its
// current spec: it applied the manifest (with the references resolved, so
// the live object carries the spec's annotations) and set Synced and Ready
// for the Object's generation.
func providerSyncs(t testing.TB, o obj) obj {
	t.Helper()
	o = mustStruct(t, o).AsMap()
	md := o["metadata"].(obj)
	md["finalizers"] = []any{"finalizer.managedresource.crossplane.io"}
	gen := md["generation"]
	conds := []any{cond("Synced", true, "ReconcileSuccess", ""), cond("Ready", true, "Available", "")}
	for _, c := range conds {
		c.(obj)["observedGeneration"] = gen
	}
	live := mustStruct(t, o["spec"].(obj)["forProvider"].(obj)["manifest"].(obj)).AsMap()
	o["status"] = obj{"conditions": conds, "atProvider": obj{"manifest": live}}
	return o
}

// results are the response's results as "SEVERITY: message", sorted.
func results(rsp *fnv1.RunFunctionResponse) []string { return summarize(rsp).Results }
