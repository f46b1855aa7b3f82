package v1alpha1_test

// routeDefaults are the ModelRoute XRD's defaults; filled in once the
// ModelRoute's types move here.
var routeDefaults = map[string]any{}
