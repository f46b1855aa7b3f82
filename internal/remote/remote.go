// Package remote wraps manifests for the gateway's cluster in
// provider-kubernetes Objects, and reads back what an observed Object saw.
package remote

import (
	"maps"
	"strings"
)

// The namespaced Object of provider-kubernetes (Crossplane v2 style).
const (
	// APIVersion of the provider-kubernetes namespaced Object.
	APIVersion = "kubernetes.m.crossplane.io/v1alpha1"
	// Kind of the provider-kubernetes Object.
	Kind = "Object"
	// providerConfigKind is the kind of provider config an Object names.
	providerConfigKind = "ClusterProviderConfig"
)

// Management policies (provider-kubernetes spec.managementPolicies).
const (
	PolicyObserve = "Observe"
	policyCreate  = "Create"
	policyUpdate  = "Update"
)

// Readiness policies (provider-kubernetes spec.readiness.policy).
const (
	// readinessCEL makes the provider set Ready from spec.readiness.celQuery,
	// evaluated on the live object it just read.
	readinessCEL = "DeriveFromCelQuery"
)

// Meta is the part of ObjectMeta a desired object carries.
type Meta struct {
	Name        string            `json:"name,omitempty"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Manifest is a desired Kubernetes object with a spec. Composers use the
// upstream typed spec (gwapiv1.GatewaySpec, aigv1b1.AIGatewayRouteSpec, ...)
// for S, so the upstream API decides the field names and shapes, while the
// envelope stays free of the empty status and creationTimestamp a full
// typed object would carry.
type Manifest[S any] struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   Meta   `json:"metadata"`
	Spec       *S     `json:"spec,omitempty"`
}

// Object is a provider-kubernetes namespaced Object.
type Object struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   Meta       `json:"metadata"`
	Spec       objectSpec `json:"spec"`
}

// objectSpec is the spec of a provider-kubernetes Object.
type objectSpec struct {
	ManagementPolicies []string          `json:"managementPolicies,omitempty"`
	ForProvider        forProvider       `json:"forProvider"`
	ProviderConfigRef  providerConfigRef `json:"providerConfigRef"`
	References         []reference       `json:"references,omitempty"`
	Readiness          *readiness        `json:"readiness,omitempty"`
	Watch              bool              `json:"watch,omitempty"`
}

// reference patches a value from an object on the control plane into the
// manifest before the provider applies it (provider-kubernetes v1.3.1 and v1.4.1
// apis/namespaced/object/v1alpha1/types.go, reference and PatchesFrom).
// The provider reads the referenced object with its local client, that is
// on the control plane (internal/controller/namespaced/object/object.go,
// resolveReferencies).
type reference struct {
	PatchesFrom *patchesFrom `json:"patchesFrom,omitempty"`
	ToFieldPath *string      `json:"toFieldPath,omitempty"`
}

// patchesFrom names the control-plane object and field a reference copies.
type patchesFrom struct {
	APIVersion string  `json:"apiVersion"`
	Kind       string  `json:"kind"`
	Name       string  `json:"name"`
	Namespace  string  `json:"namespace,omitempty"`
	FieldPath  *string `json:"fieldPath,omitempty"`
}

// forProvider holds the manifest to apply (or observe) on the remote cluster.
type forProvider struct {
	Manifest any `json:"manifest"`
}

// providerConfigRef names the provider config that reaches the remote
// cluster.
type providerConfigRef struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// readiness says how the provider derives the Object's Ready condition.
type readiness struct {
	Policy   string `json:"policy"`
	CelQuery string `json:"celQuery,omitempty"`
}

// Option changes an Object.
type Option func(*Object)

// Wrap puts manifest into an Object that applies it through the named
// ClusterProviderConfig.
func Wrap(providerConfig string, manifest any, opts ...Option) *Object {
	o := &Object{
		APIVersion: APIVersion,
		Kind:       Kind,
		Spec: objectSpec{
			ForProvider:       forProvider{Manifest: manifest},
			ProviderConfigRef: providerConfigRef{Kind: providerConfigKind, Name: providerConfig},
		},
	}
	for _, fn := range opts {
		fn(o)
	}
	return o
}

// InNamespace puts the Object in a control-plane namespace. A cluster-scoped
// composite's namespaced resources must name one explicitly; a namespaced
// composite's are forced into its own namespace by Crossplane.
func InNamespace(ns string) Option {
	return func(o *Object) { o.Metadata.Namespace = ns }
}

// ObserveOnly makes the provider only read the object: it never creates,
// changes or deletes it.
func ObserveOnly() Option {
	return func(o *Object) { o.Spec.ManagementPolicies = []string{PolicyObserve} }
}

// NeverDelete lets the provider create and update the object but never
// delete it, so removing one composite does not remove something others
// share.
func NeverDelete() Option {
	return func(o *Object) {
		o.Spec.ManagementPolicies = []string{PolicyObserve, policyCreate, policyUpdate}
	}
}

// Watch asks the provider to watch the remote object, so a change shows up
// in the Object at once instead of at the next poll. It only takes effect
// when the provider runs with watches enabled (--enable-watches).
func Watch() Option {
	return func(o *Object) { o.Spec.Watch = true }
}

// patchFrom adds a reference that copies fieldPath of a control-plane
// object into toFieldPath of the manifest each time the provider applies
// it.
func patchFrom(from patchesFrom, toFieldPath string) Option {
	return func(o *Object) {
		o.Spec.References = append(o.Spec.References, reference{PatchesFrom: &from, ToFieldPath: &toFieldPath})
	}
}

// ReadyWhen makes the provider derive Ready from a CEL query on the live
// object.
func ReadyWhen(celQuery string) Option {
	return func(o *Object) { o.Spec.Readiness = &readiness{Policy: readinessCEL, CelQuery: celQuery} }
}

// secretManifest is a Secret as the function desires it: no values, only
// the keys a Secret of its type must have from its creation, each empty.
// provider-kubernetes patches the values in from the control plane
// (SecretCopy).
type secretManifest struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   Meta              `json:"metadata"`
	Type       string            `json:"type"`
	Data       map[string]string `json:"data,omitempty"`
}

// KeyCopy copies one value of a control-plane Secret: FieldPath is read
// there, ToFieldPath written into the manifest.
type KeyCopy struct {
	FieldPath   string
	ToFieldPath string
}

// SecretCopy is a Secret on the remote cluster whose values
// provider-kubernetes copies from a Secret on the control plane each time
// it applies the manifest (spec.references[].patchesFrom, read with its
// control-plane client: provider-kubernetes v1.3.1 and v1.4.1
// internal/controller/namespaced/object/object.go, resolveReferencies). The
// values never pass through the function or into an Object's spec.
//
// The references are added only once the Object exists and carries the
// provider's finalizer, and the provider has created the remote Secret:
// the external-create-succeeded annotation says so as soon as the create
// is done, before the provider's next reconcile reads the Secret back
// (CopyStateIn, MayReference). The provider patches
// the values into its in-memory copy of the Object while observing, and on
// an Object's first reconcile crossplane-runtime writes that copy back
// with a full Update: once to add the finalizer (v2.4.0
// pkg/reconciler/managed/reconciler.go, AddFinalizer, which
// provider-kubernetes implements as Update) and once to mark the external
// create pending. Either would store the values in the Object's spec.
// Later reconciles only update the Object's status.
//
// The manifest carries the control-plane Secret's resourceVersion in
// VersionAnnotation, so a changed Secret changes the Object's spec and the
// provider applies it again at once, instead of at its next drift check
// (--poll, ten minutes by default in v1.3.1).
type SecretCopy struct {
	// Meta names the Secret on the remote cluster.
	Meta Meta
	// Type is the Secret's type, which is immutable: it is set from the
	// first composition on.
	Type string
	// Placeholders are keys the Secret's type requires from its creation;
	// they are desired empty until the references fill them.
	Placeholders []string
	// Name and Namespace name the Secret on the control plane.
	Name, Namespace string
	// Keys are the values to copy.
	Keys []KeyCopy
	// Version is the control-plane Secret's resourceVersion; empty leaves
	// the annotation out.
	Version, VersionAnnotation string
}

// Object wraps the Secret in an Object for providerConfig: with its
// references only when mayReference.
func (c SecretCopy) Object(providerConfig string, mayReference bool, opts ...Option) *Object {
	md := c.Meta
	m := &secretManifest{APIVersion: "v1", Kind: "Secret", Metadata: md, Type: c.Type}
	if len(c.Placeholders) > 0 {
		m.Data = make(map[string]string, len(c.Placeholders))
		for _, k := range c.Placeholders {
			m.Data[k] = ""
		}
	}
	if mayReference {
		if c.Version != "" && c.VersionAnnotation != "" {
			annotations := map[string]string{c.VersionAnnotation: c.Version}
			maps.Copy(annotations, md.Annotations)
			m.Metadata.Annotations = annotations
		}
		for _, k := range c.Keys {
			opts = append(opts, patchFrom(patchesFrom{
				APIVersion: "v1", Kind: "Secret", Name: c.Name, Namespace: c.Namespace, FieldPath: &k.FieldPath,
			}, k.ToFieldPath))
		}
	}
	return Wrap(providerConfig, m, opts...)
}

// CopyState is how far the Object of a SecretCopy has come.
type CopyState struct {
	// MayReference: the provider has created the Object's Secret and
	// finalized the Object, or the Object carries its references already,
	// so the references may be (or stay) in its spec.
	MayReference bool
	// Delivered: the provider has synced the Object's current spec, with
	// its references, so the remote Secret has the values.
	Delivered bool
	// AppliedVersion is the version annotation of the manifest in the
	// Object's spec, as Crossplane last applied it; LiveVersion that of the
	// remote Secret as the provider last read it, while the Object is Live.
	// Each is empty without one. The annotation goes into the manifest
	// only together with the references (SecretCopy.Object), and the
	// provider applies the two at once, so a remote Secret that carries a
	// version annotation has been given the control-plane values at that
	// version or a later one.
	AppliedVersion, LiveVersion string
}

// CopyStateIn reads the CopyState of the observed Object under name.
//
// An Object being deleted has come nowhere: Crossplane may observe it,
// references and all, after it stopped desiring it and while the provider
// still removes its remote object (crossplane-runtime v2.4.0
// pkg/reconciler/managed/reconciler.go: the finalizer goes only after the
// external delete). Should the function desire it again then, as when a
// gateway's caller auth is turned off and on at once, Crossplane applies
// it only once the old one is gone, which creates it anew, and
// provider-kubernetes writes the values the references resolve to back
// into the new Object when it adds its finalizer (crossplane-runtime
// v2.4.0 managed reconciler, AddFinalizer): the leak MayReference exists
// to prevent. So it is composed without references, as a new Object is.
func CopyStateIn(obs map[string]Observed, name string) CopyState {
	o, ok := obs[name]
	if ok && o.deleting() {
		return CopyState{}
	}
	return CopyState{
		MayReference: ok && (o.hasReferences() || (o.finalized() && (o.Reported() || o.created()))),
		Delivered:    ok && o.hasReferences() && o.Reported() && o.syncedNow(),
	}
}

// CopyStateAt reads the CopyState of the observed Object under name with
// the versions its manifests carry in annotation.
func CopyStateAt(obs map[string]Observed, name, annotation string) CopyState {
	c := CopyStateIn(obs, name)
	o, ok := obs[name]
	if !ok {
		return c
	}
	c.AppliedVersion = annotationOf(o.Applied(), annotation)
	if o.Live() {
		c.LiveVersion = annotationOf(o.Manifest(), annotation)
	}
	return c
}

// annotationOf reads one annotation of a manifest.
func annotationOf(m map[string]any, key string) string {
	md, _ := m["metadata"].(map[string]any)
	a, _ := md["annotations"].(map[string]any)
	v, _ := a[key].(string)
	return v
}

// Source names a control-plane object that a VersionsMap follows.
type Source struct {
	Kind, Name, Namespace string
}

// key is the Source's key in the VersionsMap: a ConfigMap key allows
// letters, digits, '-', '_' and '.', and a kind and an object name are
// made of those.
func (s Source) key() string { return strings.ToLower(s.Kind) + "." + s.Name }

// VersionsMap is a ConfigMap on the remote cluster whose data
// provider-kubernetes fills with the resourceVersion of each Source on the
// control plane, and which it watches. It carries no value of a Source,
// only its version, so it is what makes a change of a control-plane Secret
// or ConfigMap that Crossplane does not watch (a required resource:
// crossplane v2.2.0 and v2.3.0 internal/controller/apiextensions/composite/
// reconciler.go watches only composed resources) wake the composite within
// seconds:
//
//   - provider-kubernetes, with watches on, starts an informer on the
//     control plane for the kind of each reference of a watched Object,
//     and enqueues every watched Object that references an object that
//     changes (provider-kubernetes v1.3.1 and v1.4.1
//     internal/controller/namespaced/object/object.go, resolveReferencies
//     and WatchResources; indexes.go, enqueueObjectsForReferences, which
//     matches the referenced object by name, so a Source created after
//     the Object is found too once any watched Object has started the
//     kind's informer);
//   - the provider applies the ConfigMap with the new version and records
//     it in the Object's status.atProvider.manifest (object.go,
//     setAtProvider), a change of a composed resource that Crossplane
//     does watch.
//
// The remote watch is on ConfigMaps, which the provider may list and watch
// on the gateway cluster already (deploy/gateway-cluster-rbac.yaml); a
// watched Secret copy would make it watch every Secret there. On the
// control plane it may watch Secrets and ConfigMaps: Crossplane grants
// every provider all verbs on both (crossplane v2.3.0
// internal/controller/rbac/provider/roles/roles.go, rulesSystemExtra).
//
// The references are added only once the provider has finalized the Object
// (MayReference, as for a SecretCopy): when it first finalizes an Object,
// provider-kubernetes also puts a finalizer of its own on every object the
// Object references (provider-kubernetes v1.3.1 and v1.4.1
// internal/controller/namespaced/object/object.go, objFinalizer.AddFinalizer
// and handleRefFinalizer), which would keep a team's Secret from ever being
// deleted, and fails while one does not exist yet.
//
// While a Source does not exist, the provider cannot resolve the Object's
// references and applies none of them (resolveReferencies stops at the
// first it cannot get); it tries again on its error back-off, at most a
// minute (crossplane-runtime v2.4.0 pkg/ratelimiter/default.go,
// NewController), or at once when the Source's informer sees it created.
type VersionsMap struct {
	// Meta names the ConfigMap on the remote cluster.
	Meta Meta
	// Sources are the control-plane objects to follow.
	Sources []Source
}

// Object wraps the ConfigMap in a watched Object for providerConfig: with
// its references only when mayReference.
func (v VersionsMap) Object(providerConfig string, mayReference bool) *Object {
	opts := []Option{Watch()}
	if mayReference {
		for _, s := range v.Sources {
			fp := "metadata.resourceVersion"
			opts = append(opts, patchFrom(patchesFrom{
				APIVersion: "v1", Kind: s.Kind, Name: s.Name, Namespace: s.Namespace, FieldPath: &fp,
			}, "data["+s.key()+"]"))
		}
	}
	return Wrap(providerConfig, &versionsManifest{APIVersion: "v1", Kind: "ConfigMap", Metadata: v.Meta}, opts...)
}

// versionsManifest is a VersionsMap's ConfigMap as the function desires
// it: no data, which the references fill in.
type versionsManifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   Meta   `json:"metadata"`
}
