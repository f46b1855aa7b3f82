package remote

import (
	"fmt"
	"sync"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/crossplane/function-sdk-go/errors"
)

// Condition is a status Condition as read from observed data.
type Condition struct {
	Status  string
	Reason  string
	Message string
	// ObservedGeneration is the Object's generation the provider had read
	// when it set the condition (crossplane-runtime v2.4.0
	// pkg/conditions/manager.go sets it on every condition).
	ObservedGeneration int64
}

// True reports whether the condition's status is True.
func (c Condition) True() bool { return c.Status == "True" }

// Observed is what one observed provider-kubernetes Object says. It reads
// the Object's conditions at once and its live manifest only when asked,
// because most composed resources are never asked and a manifest is the
// largest part of an Object.
type Observed struct {
	// Synced and Ready are the Object's own conditions.
	Synced, Ready Condition

	object   *structpb.Struct
	manifest *structpb.Struct
	// maps holds Manifest and Applied once converted, shared by every
	// copy of the Observed: the composers ask for the same manifest
	// more than once in a reconcile (a Gateway's for its address and
	// again for its listeners), and converting a Struct to a map was
	// the largest allocation of a gateway's reconcile.
	maps *converted
}

// converted holds an Observed's manifests as maps, each converted at most
// once.
type converted struct {
	manifest, applied sync.Once
	live, last        map[string]any
}

// Read reduces an observed Object to what readiness needs.
func Read(o *structpb.Struct) (Observed, error) {
	ob := Observed{object: o, maps: &converted{}}
	status, err := field(o, "status")
	if err != nil {
		return ob, err
	}
	ap, err := field(status, "atProvider")
	if err != nil {
		return ob, err
	}
	if ob.manifest, err = field(ap, "manifest"); err != nil {
		return ob, errors.Wrap(err, "status.atProvider")
	}
	// Read the two conditions straight from the Struct: Read runs for
	// every observed resource on every reconcile.
	v, ok := status.GetFields()["conditions"]
	if _, null := v.GetKind().(*structpb.Value_NullValue); !ok || null {
		return ob, nil
	}
	list := v.GetListValue()
	if list == nil {
		return ob, errors.Errorf("status.conditions is a %T, not a list", v.AsInterface())
	}
	for i, item := range list.GetValues() {
		c := item.GetStructValue()
		if c == nil {
			return ob, errors.Errorf("status.conditions[%d] is a %T, not an object", i, item.AsInterface())
		}
		f := c.GetFields()
		cond := Condition{
			Status: f["status"].GetStringValue(), Reason: f["reason"].GetStringValue(), Message: f["message"].GetStringValue(),
			ObservedGeneration: int64(f["observedGeneration"].GetNumberValue()),
		}
		switch f["type"].GetStringValue() {
		case "Synced":
			ob.Synced = cond
		case "Ready":
			ob.Ready = cond
		}
	}
	return ob, nil
}

// generation is the Object's metadata.generation.
func (o Observed) generation() int64 {
	md := o.object.GetFields()["metadata"].GetStructValue()
	return int64(md.GetFields()["generation"].GetNumberValue())
}

// syncedNow reports whether the provider synced the Object's current spec:
// Synced is True for the generation the Object has now, not an earlier one.
func (o Observed) syncedNow() bool {
	return o.Synced.True() && o.Synced.ObservedGeneration == o.generation()
}

// finalized reports whether the provider has put its finalizer on the
// Object, which it does in the first reconcile that gets past observing
// (crossplane-runtime v2.4.0 pkg/reconciler/managed/reconciler.go,
// AddFinalizer).
func (o Observed) finalized() bool {
	md := o.object.GetFields()["metadata"].GetStructValue()
	return len(md.GetFields()["finalizers"].GetListValue().GetValues()) > 0
}

// deleting reports whether the Object is being deleted: it has a
// deletionTimestamp.
func (o Observed) deleting() bool {
	md := o.object.GetFields()["metadata"].GetStructValue()
	return md.GetFields()["deletionTimestamp"].GetStringValue() != ""
}

// createSucceeded is the annotation crossplane-runtime's managed
// reconciler writes on the Object once its external create succeeded
// (crossplane-runtime v2.4.0 pkg/meta/meta.go,
// AnnotationKeyExternalCreateSucceeded; pkg/reconciler/managed/
// reconciler.go writes it with UpdateCriticalAnnotations right after
// Create).
const createSucceeded = "crossplane.io/external-create-succeeded"

// created reports whether the provider has created the remote object and
// recorded it on the Object: its last full Update of the Object is behind
// it.
func (o Observed) created() bool {
	md := o.object.GetFields()["metadata"].GetStructValue()
	return md.GetFields()["annotations"].GetStructValue().GetFields()[createSucceeded].GetStringValue() != ""
}

// hasReferences reports whether the Object's spec carries references.
func (o Observed) hasReferences() bool {
	spec := o.object.GetFields()["spec"].GetStructValue()
	return len(spec.GetFields()["references"].GetListValue().GetValues()) > 0
}

// Reported reports whether the provider has put a live manifest in the
// Object's status at all.
func (o Observed) Reported() bool { return o.manifest != nil }

// Manifest is the live remote object the provider last read
// (status.atProvider.manifest), or nil if it has read none. Use it only
// when Live. Every call returns the same map: read it, never change it.
func (o Observed) Manifest() map[string]any {
	if o.manifest == nil {
		return nil
	}
	if o.maps == nil {
		return o.manifest.AsMap()
	}
	o.maps.manifest.Do(func() { o.maps.live = o.manifest.AsMap() })
	return o.maps.live
}

// Applied is the manifest Crossplane last applied to the Object
// (spec.forProvider.manifest), or nil. It converts only that part of the
// Object. Every call returns the same map: read it, never change it.
func (o Observed) Applied() map[string]any {
	m := o.applied()
	if m == nil {
		return nil
	}
	if o.maps == nil {
		return m.AsMap()
	}
	o.maps.applied.Do(func() { o.maps.last = m.AsMap() })
	return o.maps.last
}

// LiveAt is the value at path in the live manifest (the whole manifest
// for no path), or nil when it has none: for decode.Into and the string
// lookups, which read it straight from the protobuf message, without
// converting the manifest to maps as Manifest does.
func (o Observed) LiveAt(path ...string) *structpb.Value {
	return at(o.manifest, path)
}

// LiveString is the string at path in the live manifest, or "".
func (o Observed) LiveString(path ...string) string {
	return o.LiveAt(path...).GetStringValue()
}

// LiveGeneration is the live object's metadata.generation, 0 if it has
// none. Numbers reach the function as a Struct's doubles.
func (o Observed) LiveGeneration() int64 {
	return int64(o.LiveAt("metadata", "generation").GetNumberValue())
}

// AppliedString is the string at path in the manifest Crossplane last
// applied to the Object, or "".
func (o Observed) AppliedString(path ...string) string {
	return at(o.applied(), path).GetStringValue()
}

// applied is the Object's spec.forProvider.manifest, or nil.
func (o Observed) applied() *structpb.Struct {
	fp := o.object.GetFields()["spec"].GetStructValue().GetFields()["forProvider"].GetStructValue()
	return fp.GetFields()["manifest"].GetStructValue()
}

// at is the value at path in s (s itself, wrapped, for no path), or nil.
func at(s *structpb.Struct, path []string) *structpb.Value {
	if s == nil {
		return nil
	}
	if len(path) == 0 {
		return structpb.NewStructValue(s)
	}
	v := s.GetFields()[path[0]]
	for _, k := range path[1:] {
		v = v.GetStructValue().GetFields()[k]
	}
	return v
}

// Object is the whole observed Object, as Crossplane sent it.
func (o Observed) Object() map[string]any {
	if o.object == nil {
		return nil
	}
	return o.object.AsMap()
}

// Live reports whether the provider's last look at the remote object
// succeeded and found it. If the remote object disappears, an observe-only
// Object goes Synced=False but keeps its old manifest and Ready condition
// (crossplane-runtime's managed reconciler stops at "external resource does
// not exist" and leaves status.atProvider alone), so a manifest alone is not
// evidence.
func (o Observed) Live() bool {
	return o.manifest != nil && o.Synced.True()
}

// liveAndReady reports whether the Object is live and the provider says it
// is Ready: the evidence a composed resource's readiness rests on when the
// function has nothing more specific to read.
func (o Observed) liveAndReady() bool { return o.Live() && o.Ready.True() }

// ReadyIn reports whether the observed Object under name is LiveAndReady.
func ReadyIn(obs map[string]Observed, name string) bool {
	o, ok := obs[name]
	return ok && o.liveAndReady()
}

// field reads a nested object; a missing key or null is nil, anything else
// that is not an object is an error.
func field(s *structpb.Struct, key string) (*structpb.Struct, error) {
	v, ok := s.GetFields()[key]
	if !ok {
		return nil, nil
	}
	switch k := v.GetKind().(type) {
	case *structpb.Value_StructValue:
		return k.StructValue, nil
	case *structpb.Value_NullValue:
		return nil, nil
	default:
		return nil, errors.Errorf("%s is a %T, not an object", key, v.AsInterface())
	}
}

// Carry returns the desired parts of an observed composed resource:
// apiVersion, kind, metadata name, namespace, labels and annotations, and
// spec. It leaves out status and server-set metadata (resourceVersion, uid,
// managedFields, ...), which must never be sent back as desired state.
func Carry(observed map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range []string{"apiVersion", "kind", "spec"} {
		if v, ok := observed[k]; ok {
			out[k] = v
		}
	}
	if md, ok := observed["metadata"].(map[string]any); ok {
		keep := map[string]any{}
		for _, k := range []string{"name", "namespace", "labels", "annotations"} {
			if v, ok := md[k]; ok {
				keep[k] = v
			}
		}
		out["metadata"] = keep
	}
	return out
}

// SyncNote explains why an Object's view cannot be trusted, for a message
// that says the Object's remote object has not been observed; exists says
// whether the Object is observed at all.
func SyncNote(o Observed, exists bool) string {
	switch {
	case !exists:
		return ""
	case o.Synced.Status == "" && !o.Reported():
		return " (the Object has not reported yet)"
	case !o.Synced.True():
		if o.Synced.Message != "" {
			return fmt.Sprintf(" (the Object is not Synced: %s)", o.Synced.Message)
		}
		return " (the Object is not Synced)"
	}
	return ""
}
