// Package validate checks Kubernetes objects against upstream CRDs the way
// an API server would on create, in-process and without a cluster: unknown
// fields, structural defaulting, OpenAPI schema validation, ObjectMeta
// validation, list-type invariants and the CRDs' CEL rules
// (x-kubernetes-validations). It is for the composed output of the
// function: every provider-kubernetes Object, and the manifest each Object
// carries to the remote cluster.
//
// The steps and their order follow the create path of
// k8s.io/apiextensions-apiserver v0.36.1 (pkg/apiserver/customresource_handler.go
// decodes, prunes and defaults; pkg/registry/customresource/strategy.go and
// validator.go validate). One difference is deliberate: the API server
// prunes unknown fields silently unless the client asks for strict field
// validation, whereas here every unknown field is an error, because a field
// the API server would drop is a field the function meant to set and lost.
package validate

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CEL cost limits, the values of PerCallLimit and RuntimeCELCostBudget in
// k8s.io/apiserver v0.36.1 pkg/apis/cel/config.go. They are repeated here
// because importing k8s.io/apiserver directly would need it listed in the
// function's go.mod, which only has it as a transitive dependency.
const (
	celPerCallLimit      = 1000000
	celRuntimeCostBudget = 10000000
)

// maxGeneratedNameBase is how much of generateName the API server keeps.
const maxGeneratedNameBase = 63 - 5

// Validator validates objects against a set of CRDs, and the core kinds the
// function composes (see core.go). It is safe for concurrent use.
type Validator struct {
	mu       sync.Mutex
	versions map[schema.GroupVersionKind]*crdVersion
	// files are CRD files indexed but not parsed yet (see Load), by the
	// group and kind of the CRDs in them.
	files map[schema.GroupKind]*crdFile
}

// crdVersion is one version of one CRD. Its schema is compiled on first
// use: most CRDs loaded are never needed, and compiling a large one (the
// OpenAPI validator and the CEL programs of EnvoyProxy's 1.3 MB schema)
// takes a sizeable part of a second.
type crdVersion struct {
	crd        string
	namespaced bool
	served     bool
	schema     *apiextensions.JSONSchemaProps

	once     sync.Once
	compiled *compiled
	err      error
}

// compiled is what validating against one CRD version needs.
type compiled struct {
	structural *structuralschema.Structural
	openAPI    apiservervalidation.SchemaValidator
	cel        *cel.Validator // nil when the schema has no CEL rules
}

// New returns a Validator for the CRDs. Two CRDs that define the same
// group, version and kind are an error.
func New(crds []*apiextensionsv1.CustomResourceDefinition) (*Validator, error) {
	v := &Validator{versions: map[schema.GroupVersionKind]*crdVersion{}, files: map[schema.GroupKind]*crdFile{}}
	if err := v.add(crds...); err != nil {
		return nil, err
	}
	return v, nil
}

// add indexes CRDs by group, version and kind. The caller holds v.mu, or
// owns v alone.
func (v *Validator) add(crds ...*apiextensionsv1.CustomResourceDefinition) error {
	for _, in := range crds {
		crd := in.DeepCopy()
		// The API server defaults a CRD when it is created; do the same so
		// the internal form below is what the API server would hold.
		apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
		internal := &apiextensions.CustomResourceDefinition{}
		if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, internal, nil); err != nil {
			return fmt.Errorf("cannot convert CRD %s: %w", crd.Name, err)
		}
		for _, ver := range internal.Spec.Versions {
			gvk := schema.GroupVersionKind{Group: internal.Spec.Group, Version: ver.Name, Kind: internal.Spec.Names.Kind}
			if prev, ok := v.versions[gvk]; ok {
				return fmt.Errorf("cannot use CRD %s: %s is already defined by CRD %s", crd.Name, gvk, prev.crd)
			}
			// When every version has the same schema, the conversion to
			// the internal form hoists it into Spec.Validation and leaves
			// the versions without one; GetSchemaForVersion knows where
			// to look.
			s, err := apiextensions.GetSchemaForVersion(internal, ver.Name)
			if err != nil {
				return fmt.Errorf("cannot find the schema of %s in CRD %s: %w", gvk, crd.Name, err)
			}
			if s == nil || s.OpenAPIV3Schema == nil {
				return fmt.Errorf("cannot use CRD %s: %s has no schema", crd.Name, gvk)
			}
			v.versions[gvk] = &crdVersion{
				crd:        crd.Name,
				namespaced: internal.Spec.Scope == apiextensions.NamespaceScoped,
				served:     ver.Served,
				schema:     s.OpenAPIV3Schema,
			}
		}
	}
	return nil
}

// Kinds returns every group and kind the Validator has a CRD for, parsed or
// not yet, sorted.
func (v *Validator) Kinds() []schema.GroupKind {
	v.mu.Lock()
	defer v.mu.Unlock()
	seen := map[schema.GroupKind]bool{}
	for gvk := range v.versions {
		seen[gvk.GroupKind()] = true
	}
	for gk := range v.files {
		seen[gk] = true
	}
	out := make([]schema.GroupKind, 0, len(seen))
	for gk := range seen {
		out = append(out, gk)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// lookup returns the CRD version for gvk, parsing its file first if it
// was indexed but not parsed yet.
func (v *Validator) lookup(gvk schema.GroupVersionKind) (*crdVersion, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if cv, ok := v.versions[gvk]; ok {
		return cv, nil
	}
	f, ok := v.files[gvk.GroupKind()]
	if !ok {
		return nil, nil
	}
	if err := v.parse(f); err != nil {
		return nil, err
	}
	return v.versions[gvk], nil
}

func (cv *crdVersion) compile() (*compiled, error) {
	cv.once.Do(func() {
		s, err := structuralschema.NewStructural(cv.schema)
		if err != nil {
			cv.err = fmt.Errorf("cannot build the structural schema of CRD %s: %w", cv.crd, err)
			return
		}
		sv, _, err := apiservervalidation.NewSchemaValidator(cv.schema)
		if err != nil {
			cv.err = fmt.Errorf("cannot build the OpenAPI validator of CRD %s: %w", cv.crd, err)
			return
		}
		cv.compiled = &compiled{
			structural: s,
			openAPI:    sv,
			cel:        cel.NewValidator(s, true, celPerCallLimit),
		}
	})
	return cv.compiled, cv.err
}

// Validate validates obj, a CR of one of the Validator's CRDs or one of the
// core kinds it knows, as the API server would on create. It returns the
// object as the API server would store it (unknown fields pruned, defaults
// applied; core kinds are returned as given) and every error found. obj is
// not changed. Numbers in obj should be int64 or float64 as
// k8s.io/apimachinery/pkg/util/json decodes them.
func (v *Validator) Validate(ctx context.Context, obj map[string]any) (map[string]any, field.ErrorList) {
	return v.validate(ctx, nil, obj, nil)
}

// ValidateUpdate validates obj as an update of old, a CR of one of the
// Validator's CRDs, as the API server would: the same steps as Validate,
// and the CEL rules see old as oldSelf, so transition rules (self ==
// oldSelf) run, as they do on the update path (k8s.io/apiextensions-apiserver
// v0.36.1 pkg/registry/customresource/strategy.go, ValidateUpdate, passes
// the old object to the CEL validator; on create it passes none, and rules
// that use oldSelf are skipped). old is pruned and defaulted the same way,
// as the API server stored it.
func (v *Validator) ValidateUpdate(ctx context.Context, old, obj map[string]any) (map[string]any, field.ErrorList) {
	if old == nil {
		return nil, field.ErrorList{field.Required(field.NewPath("oldSelf"), "an update needs the old object")}
	}
	return v.validate(ctx, nil, obj, old)
}

// ValidateComposed validates a composed resource. A provider-kubernetes
// Object is validated against the provider's CRD, and the manifest it
// wraps (spec.forProvider.manifest) against its own CRD or core kind, since
// the provider applies it verbatim to the remote cluster, whose API server
// validates it there. Manifest errors carry the manifest's path.
func (v *Validator) ValidateComposed(ctx context.Context, obj map[string]any) field.ErrorList {
	_, errs := v.validate(ctx, nil, obj, nil)
	u := unstructured.Unstructured{Object: obj}
	if !IsObject(u.GroupVersionKind()) {
		return errs
	}
	path := field.NewPath("spec", "forProvider", "manifest")
	m, ok, err := unstructured.NestedMap(obj, "spec", "forProvider", "manifest")
	switch {
	case err != nil:
		return append(errs, field.Invalid(path, nil, err.Error()))
	case !ok:
		return append(errs, field.Required(path, "a provider-kubernetes Object needs a manifest"))
	}
	if observeOnly(obj) {
		return append(errs, v.validateIdentity(path, m)...)
	}
	_, merrs := v.validate(ctx, path, m, nil)
	return append(errs, merrs...)
}

// observeOnly reports whether an Object only observes its manifest
// (managementPolicies [Observe]). Such a manifest is never created: the
// provider reads the object by name and, only when it exists, dry-runs an
// apply of the manifest over it (provider-kubernetes v1.3.1
// internal/controller/namespaced/object/object.go, Observe: Get, then
// syncer.GetDesiredState), so required fields of the kind's spec need not
// be there.
func observeOnly(obj map[string]any) bool {
	p, _, _ := unstructured.NestedStringSlice(obj, "spec", "managementPolicies")
	return len(p) == 1 && p[0] == "Observe"
}

// validateIdentity checks what an observe-only manifest must get right: a
// kind some CRD serves (or a core kind), and a name.
func (v *Validator) validateIdentity(root *field.Path, m map[string]any) field.ErrorList {
	u := &unstructured.Unstructured{Object: m}
	gvk := u.GroupVersionKind()
	cv, err := v.lookup(gvk)
	if err != nil {
		return field.ErrorList{field.InternalError(root, err)}
	}
	if _, core := coreKinds[gvk]; cv == nil && !core {
		return field.ErrorList{field.Invalid(root.Child("kind"), u.GetKind(), "no CRD defines this kind in "+u.GetAPIVersion()+", and it is not a core kind this validator knows")}
	}
	if cv != nil && !cv.served {
		return field.ErrorList{field.Invalid(root.Child("apiVersion"), u.GetAPIVersion(), "CRD "+cv.crd+" does not serve this version")}
	}
	if u.GetName() == "" {
		return field.ErrorList{field.Required(root.Child("metadata", "name"), "an observed object is read by name")}
	}
	return nil
}

// nameFromGenerateName names an object from its generateName, as the API
// server does before it validates it (k8s.io/apiserver
// pkg/registry/rest/create.go, BeforeCreate), with a random five-character
// suffix after at most 58 characters of generateName
// (pkg/storage/names/generate.go). Composed resources come with
// generateName only; a fixed suffix keeps the result stable.
func nameFromGenerateName(u *unstructured.Unstructured) {
	if u.GetName() == "" && u.GetGenerateName() != "" {
		base := u.GetGenerateName()
		if len(base) > maxGeneratedNameBase {
			base = base[:maxGeneratedNameBase]
		}
		u.SetName(base + "x0x0x")
	}
}

// IsObject reports whether gvk is provider-kubernetes' Object, namespaced
// (kubernetes.m.crossplane.io) or cluster-scoped (kubernetes.crossplane.io).
func IsObject(gvk schema.GroupVersionKind) bool {
	return gvk.Kind == "Object" && (gvk.Group == "kubernetes.m.crossplane.io" || gvk.Group == "kubernetes.crossplane.io")
}

func (v *Validator) validate(ctx context.Context, root *field.Path, in, old map[string]any) (map[string]any, field.ErrorList) {
	u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(in)}
	gvk := u.GroupVersionKind()
	cv, err := v.lookup(gvk)
	if err != nil {
		return nil, field.ErrorList{field.InternalError(root, err)}
	}
	if cv == nil {
		if ck, ok := coreKinds[gvk]; ok {
			return u.Object, ck.validate(root, u.Object)
		}
		return nil, field.ErrorList{field.Invalid(root.Child("kind"), u.GetKind(), "no CRD defines this kind in "+u.GetAPIVersion()+", and it is not a core kind this validator knows")}
	}
	if !cv.served {
		return nil, field.ErrorList{field.Invalid(root.Child("apiVersion"), u.GetAPIVersion(), "CRD "+cv.crd+" does not serve this version")}
	}
	c, err := cv.compile()
	if err != nil {
		return nil, field.ErrorList{field.InternalError(root, err)}
	}

	nameFromGenerateName(u)

	// Decoding: the API server drops unknown fields, in ObjectMeta, in the
	// schema's properties and in embedded resources' ObjectMeta. Each one
	// is an error here (see the package doc).
	var errs field.ErrorList
	_, _, unknown, err := objectmeta.GetObjectMetaWithOptions(u.Object, objectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		errs = append(errs, field.Invalid(root.Child("metadata"), u.Object["metadata"], err.Error()))
	}
	unknown = append(unknown, pruning.PruneWithOptions(u.Object, c.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, c.structural)
	ferr, embedded := objectmeta.CoerceWithOptions(root, u.Object, c.structural, false, objectmeta.CoerceOptions{ReturnUnknownFieldPaths: true})
	if ferr != nil {
		errs = append(errs, ferr)
	}
	unknown = append(unknown, embedded...)
	sort.Strings(unknown)
	for _, p := range unknown {
		errs = append(errs, field.Forbidden(child(root, p), "unknown field: CRD "+cv.crd+" has no such field, so the API server would drop it"))
	}

	// Defaulting happens after pruning, as the API server's codec does, and
	// before validation, so that CEL rules and required fields see the
	// defaults.
	structuraldefaulting.Default(u.Object, c.structural)

	errs = append(errs, apivalidation.ValidateObjectMetaAccessor(u, cv.namespaced, apivalidation.NameIsDNSSubdomain, root.Child("metadata"))...)
	errs = append(errs, apiservervalidation.ValidateCustomResource(root, u.Object, c.openAPI)...)
	errs = append(errs, objectmeta.Validate(root, u.Object, c.structural, false)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(root, c.structural, u.Object)...)

	// Like the API server, skip the CEL rules when the schema already
	// rejected the object in a way the rules may not be written to survive
	// (a missing required field, a value of the wrong type, too many items).
	if c.cel != nil {
		if blocking(errs) {
			errs = append(errs, field.Invalid(root, nil, "CEL rules (x-kubernetes-validations) were not checked because of the errors above"))
		} else {
			cerrs, _ := c.cel.Validate(ctx, root, c.structural, u.Object, c.asOld(old), celRuntimeCostBudget)
			errs = append(errs, cerrs...)
		}
	}
	return u.Object, errs
}

// asOld prepares the object an update replaces for the CEL rules'
// oldSelf, pruned and defaulted as the API server stores it; nil for a
// create.
func (c *compiled) asOld(old map[string]any) any {
	if old == nil {
		return nil
	}
	o := runtime.DeepCopyJSON(old)
	pruning.PruneWithOptions(o, c.structural, true, structuralschema.UnknownFieldPathOptions{})
	structuraldefaulting.Default(o, c.structural)
	return o
}

// blockingErrorTypes are the error types blocking looks for.
var blockingErrorTypes = []field.ErrorType{field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid}

// blocking reports whether errs holds an error of a type after which the
// API server does not run CEL rules (hasBlockingErr in
// k8s.io/apiextensions-apiserver pkg/registry/customresource/strategy.go).
func blocking(errs field.ErrorList) bool {
	for _, e := range errs {
		if slices.Contains(blockingErrorTypes, e.Type) {
			return true
		}
	}
	return false
}

// child appends a dotted path, as pruning reports it (spec.rules[0].foo),
// to root.
func child(root *field.Path, p string) *field.Path {
	if root == nil {
		return field.NewPath(p)
	}
	return root.Child(strings.TrimPrefix(p, "."))
}
