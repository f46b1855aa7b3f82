package controlplane

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// noSecretsInObjects lists every provider-kubernetes Object in every
// namespace, and both XRs, and fails the test for each forbidden value
// one of them holds.
func (sc *scenarios) noSecretsInObjects(t *testing.T, when string) {
	t.Helper()
	sc.w.Mu.Lock()
	secrets := sc.w.Secrets
	sc.w.Mu.Unlock()
	if len(secrets) == 0 {
		t.Fatalf("%s: no API key to look for", when)
	}
	n := 0
	// Events carry the function's results (Crossplane records each
	// Warning and Normal result as an event on the XR).
	for _, gvr := range []schema.GroupVersionResource{harness.GVRObject, harness.GVRInferenceGW, harness.GVRModelRoute, harness.GVREvent} {
		l, err := sc.c.Dyn.Resource(gvr).List(sc.ctx, metav1.ListOptions{})
		harness.Must(t, err)
		for i := range l.Items {
			n++
			for what, paths := range harness.FindSecrets(&l.Items[i], secrets) {
				t.Errorf("%s: %s %s holds %s at %s", when, gvr.Resource, harness.Key(&l.Items[i]), what, strings.Join(paths, ", "))
			}
		}
	}
	t.Logf("%s: no API key in any of %d Objects, XRs and events", when, n)
}

// controlPlaneKey returns the keyed backend's API key as the control
// plane's Secret holds it, base64-encoded.
func (sc *scenarios) controlPlaneKey(t *testing.T) string {
	t.Helper()
	s, err := sc.get(sc.ctx, harness.GVRSecret, harness.TeamControlNS, harness.APIKeySecret)
	harness.Must(t, err)
	v, _, _ := unstructured.NestedString(s.Object, "data", harness.APIKeyField)
	if v == "" {
		t.Fatalf("the Secret %s/%s has no data.%s", harness.TeamControlNS, harness.APIKeySecret, harness.APIKeyField)
	}
	return v
}

// gatewayKeyIs returns "" once the keyed backend's Secret on the gateway
// cluster holds want, base64-encoded as the control plane's, at
// data.apiKey, the key AI Gateway reads (ai-gateway v1.0.0
// internal/controller, apiKeyInSecret).
func (sc *scenarios) gatewayKeyIs(ctx context.Context, want string) string {
	return sc.routeKeyIs(ctx, harness.RouteName, harness.KeyedBackend, want)
}

// routeKeyIs is gatewayKeyIs for the backend of the ModelRoute named
// route: "" once that backend's Secret on the gateway cluster, which the
// function names names.BackendObject(route, backend) in the team's namespace,
// holds want at data.apiKey.
func (sc *scenarios) routeKeyIs(ctx context.Context, route, backend, want string) string {
	name := names.BackendObject(route, backend)
	s, err := sc.get(ctx, harness.GVRSecret, sc.w.TeamNS, name)
	if err != nil {
		return err.Error()
	}
	got, _, _ := unstructured.NestedString(s.Object, "data", "apiKey")
	if got != want {
		// Never print a key: say only whether there is one.
		return fmt.Sprintf("the gateway cluster's Secret %s/%s has data.apiKey set=%t, not the control plane's key", sc.w.TeamNS, name, got != "")
	}
	return ""
}

// setAPIKey writes the base64 key into the control plane's API-key Secret
// secret, as a team rotating its key does, retrying on a conflict with
// the provider's finalizer or another writer.
func (sc *scenarios) setAPIKey(t *testing.T, secret, key string) {
	t.Helper()
	harness.Must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := sc.get(sc.ctx, harness.GVRSecret, harness.TeamControlNS, secret)
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedField(s.Object, key, "data", harness.APIKeyField); err != nil {
			return err
		}
		_, err = sc.c.Dyn.Resource(harness.GVRSecret).Namespace(harness.TeamControlNS).Update(sc.ctx, s, metav1.UpdateOptions{})
		return err
	}))
}
