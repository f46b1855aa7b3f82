package harness

import (
	"encoding/base64"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// CallerKeys returns a maker of callers' API keys, base64 as a Secret holds
// them, unique to this run (prefix, the caller, a stamp), each forbidden
// to appear anywhere the world looks.
func (w *World) CallerKeys(prefix string) func(who string) string {
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	return func(who string) string {
		k := base64.StdEncoding.EncodeToString([]byte(prefix + who + "-" + stamp))
		w.Forbid("the caller key of "+who, k)
		return k
	}
}

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

// SecretValue is a value that must never appear.
type SecretValue struct {
	What, Value string // what it is, for the message; the value itself
}

// Forbid adds an API key, as a Secret's base64 data value, to the values
// no Object or XR may hold, in both its encoded and its plain form.
func (w *World) Forbid(what, encoded string) {
	plain, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		w.tb.Fatalf("cannot decode %s: %v", what, err)
	}
	w.Mu.Lock()
	defer w.Mu.Unlock()
	w.Secrets = append(w.Secrets,
		SecretValue{What: what + " (base64)", Value: encoded},
		SecretValue{What: what + " (plain)", Value: string(plain)})
}

// FindSecrets returns, for each forbidden value u holds anywhere (keys or
// string values, spec, status and metadata alike), the value's description
// and the paths where it is.
func FindSecrets(u *unstructured.Unstructured, secrets []SecretValue) map[string][]string {
	out := map[string][]string{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				for _, s := range secrets {
					if strings.Contains(k, s.Value) {
						out[s.What] = append(out[s.What], path+" (a key)")
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
				if strings.Contains(x, s.Value) {
					out[s.What] = append(out[s.What], path)
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
func (w *World) checkSecrets(gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	w.Mu.Lock()
	secrets := w.Secrets
	w.Scanned++
	w.Mu.Unlock()
	if len(secrets) == 0 {
		return
	}
	for what, paths := range FindSecrets(u, secrets) {
		k := gvr.Resource + "/" + Key(u) + "/" + what
		w.Mu.Lock()
		seen := w.leaked[k]
		w.leaked[k] = true
		w.Mu.Unlock()
		if !seen {
			w.violate("%s %s (resourceVersion %s) holds %s at %s", gvr.Resource, Key(u), u.GetResourceVersion(), what, strings.Join(paths, ", "))
		}
	}
}
