// Package v1alpha1 is the API of the two composite resources the function
// composes, InferenceGateway and ModelRoute: their root types, specs,
// statuses and every type under them, the defaults of their fields, the
// accessors that apply those defaults, and the Go validation of a spec.
//
// The doc comments of these types are the XRDs' field descriptions, and
// their markers the XRDs' schemas: internal/xrd runs controller-gen on this
// package to generate package/configuration/<kind>/xrd.yaml. One source, so
// the schema the API server enforces and the fields the function reads
// cannot drift. Each +kubebuilder:default is restated once, as an exported
// Default constant written beside its marker; a test ties the two.
//
// The API server enforces the markers; the Spec types' Validate methods
// check again what the schema cannot say, and what crossplane render (which
// does not validate an XR against its XRD) would otherwise let through.
//
// +groupName=modelplane.ai
// +versionName=v1alpha1
package v1alpha1
