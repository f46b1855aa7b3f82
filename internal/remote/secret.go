package remote

// A copied Secret is a Secret on the gateway cluster whose data
// provider-kubernetes copies from a Secret on the control plane each time
// it applies the manifest (spec.references[].patchesFrom, resolved with its
// control-plane client: provider-kubernetes v1.3.1
// internal/controller/namespaced/object/object.go, resolveReferencies). The
// key material never passes through the function's output or an Object's
// spec.
//
// The reference is added only once the Object exists and carries the
// provider's finalizer (Delivery.MayCopy). The provider patches the data
// into its in-memory copy of the Object while observing, and on an
// Object's first reconcile crossplane-runtime writes that copy back with a
// full Update: once to add the finalizer (v2.4.0
// pkg/reconciler/managed/reconciler.go, AddFinalizer, which
// provider-kubernetes implements as Update) and once to mark the external
// create pending. Either would store the data in the Object's spec. Later
// reconciles only update the Object's status.
//
// The manifest carries the control-plane Secret's resourceVersion in an
// annotation, so a changed Secret changes the Object's spec and the
// provider applies it again at once, instead of at its next drift check
// (--poll, ten minutes by default in v1.3.1). Watching the Object would do
// it too, but would make the provider watch every Secret of the gateway
// cluster.

// SecretManifest is a Secret without data: provider-kubernetes patches the
// data in from the control plane.
type SecretManifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   Meta   `json:"metadata"`
	Type       string `json:"type"`
}

// Delivery is how far a copied Secret has got.
type Delivery struct {
	// MayCopy: the Object may carry the reference that copies the data,
	// because the provider's first-reconcile writes are behind it.
	MayCopy bool
	// Delivered: the provider applied the current spec, with the
	// reference, and has read the Secret back from the gateway cluster.
	Delivered bool
}

// DeliveryOf reads the Delivery of the copied Secret observed under name.
func DeliveryOf(obs map[string]Observed, name string) Delivery {
	o, ok := obs[name]
	if !ok {
		return Delivery{}
	}
	return Delivery{
		MayCopy:   o.HasReferences() || (o.Finalized() && o.Reported()),
		Delivered: o.HasReferences() && o.Reported() && o.SyncedNow(),
	}
}

// CopiedSecret is the manifest of a Secret of type typ, and the options of
// its Object, that copies fieldPath of the control-plane Secret from into
// toFieldPath once d.MayCopy. version is from's resourceVersion; it goes
// into the annotation versionAnnotation so that every change of from is
// applied at once.
func CopiedSecret(md Meta, typ string, d Delivery, from PatchesFrom, toFieldPath, versionAnnotation, version string) (*SecretManifest, []Option) {
	var opts []Option
	if d.MayCopy {
		if version != "" {
			md.Annotations = map[string]string{versionAnnotation: version}
		}
		from.APIVersion, from.Kind = "v1", "Secret"
		opts = append(opts, PatchFrom(from, toFieldPath))
	}
	return &SecretManifest{APIVersion: "v1", Kind: "Secret", Metadata: md, Type: typ}, opts
}
