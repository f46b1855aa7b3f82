package controlplane

import (
	"context"
	"encoding/base64"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
)

// API keys never in an Object. The function composes each backend's
// API-key Secret on the gateway cluster with a provider-kubernetes
// spec.references[].patchesFrom from the ModelRoute's Secret on the
// control plane, so the key travels from Secret to Secret inside the
// provider and is never written into an Object: not into its spec (the
// desired manifest names no data), and not into its status
// (--sanitize-secrets redacts a Secret's data in status.atProvider.manifest,
// provider-kubernetes v1.4.1 and v1.3.1 object.go setAtProvider). The reference is
// added only once the credential Object exists remotely and carries its
// finalizer: on a first reconcile crossplane-runtime v2.4.0 writes the
// whole in-memory Object back with Update (pkg/reconciler/managed
// reconciler.go, AddFinalizer and SetExternalCreatePending), and by then
// Observe has patched the key into that in-memory manifest (object.go,
// resolveReferencies). The world checks every Object and XR it observes,
// every event of the whole run, for the key in plain or base64 form; the
// scenarios also list all Objects at fixed points.

// secretValue is a value that must never appear.
type secretValue struct {
	what, value string
}

// forbid adds an API key, as a Secret's base64 data value, to the values
// no Object or XR may hold, in both its encoded and its plain form.
func (w *world) forbid(what, encoded string) {
	plain, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		w.tb.Fatalf("cannot decode %s: %v", what, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.secrets = append(w.secrets,
		secretValue{what: what + " (base64)", value: encoded},
		secretValue{what: what + " (plain)", value: string(plain)})
}

// findSecrets returns, for each forbidden value u holds anywhere (keys or
// string values, spec, status and metadata alike), the value's description
// and the paths where it is.
func findSecrets(u *unstructured.Unstructured, secrets []secretValue) map[string][]string {
	out := map[string][]string{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				for _, s := range secrets {
					if strings.Contains(k, s.value) {
						out[s.what] = append(out[s.what], path+" (a key)")
					}
				}
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		case string:
			for _, s := range secrets {
				if strings.Contains(x, s.value) {
					out[s.what] = append(out[s.what], path)
				}
			}
		}
	}
	walk("", u.Object)
	for _, ps := range out {
		sort.Strings(ps)
	}
	return out
}

// checkSecrets records a violation for every forbidden value an observed
// object holds, once per object and value.
func (w *world) checkSecrets(gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	w.mu.Lock()
	secrets := w.secrets
	w.scanned++
	w.mu.Unlock()
	if len(secrets) == 0 {
		return
	}
	for what, paths := range findSecrets(u, secrets) {
		k := gvr.Resource + "/" + key(u) + "/" + what
		w.mu.Lock()
		seen := w.leaked[k]
		w.leaked[k] = true
		w.mu.Unlock()
		if !seen {
			w.violate("%s %s (resourceVersion %s) holds %s at %s", gvr.Resource, key(u), u.GetResourceVersion(), what, strings.Join(paths, ", "))
		}
	}
}

// noSecretsInObjects lists every provider-kubernetes Object in every
// namespace, and both XRs, and fails the test for each forbidden value
// one of them holds.
func (sc *scenarios) noSecretsInObjects(t *testing.T, when string) {
	t.Helper()
	sc.w.mu.Lock()
	secrets := sc.w.secrets
	sc.w.mu.Unlock()
	if len(secrets) == 0 {
		t.Fatalf("%s: no API key to look for", when)
	}
	n := 0
	// Events carry the function's results (Crossplane records each
	// Warning and Normal result as an event on the XR).
	for _, gvr := range []schema.GroupVersionResource{gvrObject, gvrInferenceGW, gvrModelRoute, gvrEvent} {
		l, err := sc.c.dyn.Resource(gvr).List(sc.ctx, metav1.ListOptions{})
		must(t, err)
		for i := range l.Items {
			n++
			for what, paths := range findSecrets(&l.Items[i], secrets) {
				t.Errorf("%s: %s %s holds %s at %s", when, gvr.Resource, key(&l.Items[i]), what, strings.Join(paths, ", "))
			}
		}
	}
	t.Logf("%s: no API key in any of %d Objects, XRs and events", when, n)
}

// controlPlaneKey returns the keyed backend's API key as the control
// plane's Secret holds it, base64-encoded.
func (sc *scenarios) controlPlaneKey(t *testing.T) string {
	t.Helper()
	s, err := sc.get(sc.ctx, gvrSecret, teamControlNS, apiKeySecret)
	must(t, err)
	v, _, _ := unstructured.NestedString(s.Object, "data", apiKeyField)
	if v == "" {
		t.Fatalf("the Secret %s/%s has no data.%s", teamControlNS, apiKeySecret, apiKeyField)
	}
	return v
}

// gatewayKeyIs returns "" once the keyed backend's Secret on the gateway
// cluster holds want, base64-encoded as the control plane's, at
// data.apiKey, the key AI Gateway reads (ai-gateway v1.0.0
// internal/controller, apiKeyInSecret).
func (sc *scenarios) gatewayKeyIs(ctx context.Context, want string) string {
	return sc.routeKeyIs(ctx, routeName, keyedBackend, want)
}

// routeKeyIs is gatewayKeyIs for the backend of the ModelRoute named
// route: "" once that backend's Secret on the gateway cluster, which the
// function names names.BackendObject(route, backend) in the team's namespace,
// holds want at data.apiKey.
func (sc *scenarios) routeKeyIs(ctx context.Context, route, backend, want string) string {
	name := names.BackendObject(route, backend)
	s, err := sc.get(ctx, gvrSecret, sc.w.teamNS, name)
	if err != nil {
		return err.Error()
	}
	got, _, _ := unstructured.NestedString(s.Object, "data", "apiKey")
	if got != want {
		// Never print a key: say only whether there is one.
		return fmt.Sprintf("the gateway cluster's Secret %s/%s has data.apiKey set=%t, not the control plane's key", sc.w.teamNS, name, got != "")
	}
	return ""
}

// TestFindSecrets checks the leak finder on its own: a key in a manifest,
// plain or base64, anywhere, is found with its path; a redacted one is not.
func TestFindSecrets(t *testing.T) {
	w := &world{tb: t}
	w.forbid("the key", base64.StdEncoding.EncodeToString([]byte("sk-test-1")))
	obj := func(m map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: m} }
	for _, tc := range []struct {
		name string
		u    *unstructured.Unstructured
		want map[string][]string
	}{{
		name: "base64 in the desired manifest",
		u:    obj(map[string]any{"spec": map[string]any{"forProvider": map[string]any{"manifest": map[string]any{"data": map[string]any{"apiKey": "c2stdGVzdC0x"}}}}}),
		want: map[string][]string{"the key (base64)": {".spec.forProvider.manifest.data.apiKey"}},
	}, {
		name: "plain in a status message",
		u:    obj(map[string]any{"status": map[string]any{"conditions": []any{map[string]any{"message": "cannot apply: sk-test-1 is bad"}}}}),
		want: map[string][]string{"the key (plain)": {".status.conditions[0].message"}},
	}, {
		name: "redacted by --sanitize-secrets",
		u:    obj(map[string]any{"status": map[string]any{"atProvider": map[string]any{"manifest": map[string]any{"data": map[string]any{"redacted": nil}}}}}),
		want: map[string][]string{},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := findSecrets(tc.u, w.secrets); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("findSecrets() = %v, want %v", got, tc.want)
			}
		})
	}
}

// setAPIKey writes the base64 key into the control plane's API-key Secret
// secret, as a team rotating its key does, retrying on a conflict with
// the provider's finalizer or another writer.
func (sc *scenarios) setAPIKey(t *testing.T, secret, key string) {
	t.Helper()
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := sc.get(sc.ctx, gvrSecret, teamControlNS, secret)
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedField(s.Object, key, "data", apiKeyField); err != nil {
			return err
		}
		_, err = sc.c.dyn.Resource(gvrSecret).Namespace(teamControlNS).Update(sc.ctx, s, metav1.UpdateOptions{})
		return err
	}))
}
