package validate

import (
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
)

// Core kinds have no CRD: the API server validates them with Go code in
// k8s.io/kubernetes, which is far too large a dependency for a test. They
// are checked minimally instead: the manifest must decode strictly into the
// k8s.io/api type (no unknown or duplicate fields, no value of the wrong
// type), and its ObjectMeta must pass the generic ObjectMeta validation
// with the name rule the API server uses for the kind. Kind-specific spec
// rules (for example a Deployment's required selector) are not checked:
// the function only sends an observe-only Deployment, which carries just a
// name and a namespace, and the API server never sees it as a create.
type coreKind struct {
	// newObj returns an empty object of the kind.
	newObj func() metav1.Object
	// namespaced is whether the kind lives in a namespace.
	namespaced bool
	// name is the API server's name rule for the kind.
	name apivalidation.ValidateNameFunc
	// extra holds kind-specific checks, if any.
	extra func(path *field.Path, obj metav1.Object) field.ErrorList
}

var coreKinds = map[schema.GroupVersionKind]coreKind{
	appsv1.SchemeGroupVersion.WithKind("Deployment"): {
		newObj:     func() metav1.Object { return &appsv1.Deployment{} },
		namespaced: true,
		name:       apivalidation.NameIsDNSSubdomain,
	},
	corev1.SchemeGroupVersion.WithKind("Secret"): {
		newObj:     func() metav1.Object { return &corev1.Secret{} },
		namespaced: true,
		name:       apivalidation.NameIsDNSSubdomain,
		extra:      secretKeys,
	},
	corev1.SchemeGroupVersion.WithKind("ConfigMap"): {
		newObj:     func() metav1.Object { return &corev1.ConfigMap{} },
		namespaced: true,
		name:       apivalidation.NameIsDNSSubdomain,
		extra:      configMapKeys,
	},
	corev1.SchemeGroupVersion.WithKind("Namespace"): {
		newObj:     func() metav1.Object { return &corev1.Namespace{} },
		namespaced: false,
		name:       apivalidation.ValidateNamespaceName, // a DNS-1123 label
	},
}

func (k coreKind) validate(root *field.Path, obj map[string]any) field.ErrorList {
	b, err := json.Marshal(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(root, err)}
	}
	typed := k.newObj()
	// UnmarshalStrict decodes the way the API server does (case-sensitive,
	// integers kept as integers) and reports unknown and duplicate fields
	// separately from hard errors such as a string where a number belongs.
	strict, err := sigsjson.UnmarshalStrict(b, typed)
	if err != nil {
		return field.ErrorList{field.Invalid(root, nil, "cannot decode: "+err.Error())}
	}
	var errs field.ErrorList
	for _, e := range strict {
		errs = append(errs, field.Forbidden(root, e.Error()))
	}
	errs = append(errs, apivalidation.ValidateObjectMetaAccessor(typed, k.namespaced, k.name, root.Child("metadata"))...)
	if k.extra != nil {
		errs = append(errs, k.extra(root, typed)...)
	}
	return errs
}

// secretKeys checks a Secret's keys as the API server does: each must be a
// valid ConfigMap key.
func secretKeys(root *field.Path, obj metav1.Object) field.ErrorList {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return field.ErrorList{field.InternalError(root, fmt.Errorf("%T is not a Secret", obj))}
	}
	var errs field.ErrorList
	for k := range s.Data {
		for _, msg := range utilvalidation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(root.Child("data").Key(k), k, msg))
		}
	}
	for k := range s.StringData {
		for _, msg := range utilvalidation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(root.Child("stringData").Key(k), k, msg))
		}
	}
	return errs
}

// configMapKeys checks a ConfigMap's keys as the API server does.
func configMapKeys(root *field.Path, obj metav1.Object) field.ErrorList {
	c, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return field.ErrorList{field.InternalError(root, fmt.Errorf("%T is not a ConfigMap", obj))}
	}
	var errs field.ErrorList
	for k := range c.Data {
		for _, msg := range utilvalidation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(root.Child("data").Key(k), k, msg))
		}
	}
	return errs
}
