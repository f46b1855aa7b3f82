package validate

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/modelplaneai/function-inference-gateway/test/internal/toolchain"
)

// skippedCEL is the error saying CEL rules were skipped after a blocking
// error, as the API server skips them.
const skippedCEL = "CEL rules (x-kubernetes-validations) were not checked"

var (
	loadOnce sync.Once
	loaded   *Validator
	loadErr  error
)

// upstream loads the upstream CRDs once for every test in this package.
func upstream(t *testing.T) *Validator {
	t.Helper()
	loadOnce.Do(func() {
		root, err := toolchain.Root()
		if err != nil {
			loadErr = err
			return
		}
		start := time.Now()
		loaded, loadErr = Load(context.Background(), root, Sources...)
		t.Logf("indexed the upstream CRDs in %s", time.Since(start))
	})
	if loadErr != nil {
		t.Fatalf("cannot load the upstream CRDs: %v", loadErr)
	}
	return loaded
}

// obj decodes YAML the way the API server decodes JSON: integers as int64.
func obj(t *testing.T, y string) map[string]any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(j, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

const aiGatewayRoute = `
apiVersion: aigateway.envoyproxy.io/v1beta1
kind: AIGatewayRoute
metadata:
  name: qwen3-8b
  namespace: ml-team
spec:
  parentRefs:
  - name: inference-gateway
    namespace: modelplane-system
    kind: Gateway
    group: gateway.networking.k8s.io
  rules:
  - matches:
    - headers:
      - name: x-ai-eg-model
        value: qwen3-8b
    backendRefs:
    - name: qwen3-8b-vllm
`

const backendSecurityPolicy = `
apiVersion: aigateway.envoyproxy.io/v1beta1
kind: BackendSecurityPolicy
metadata:
  name: openrouter
  namespace: ml-team
spec:
  type: APIKey
  apiKey:
    secretRef:
      name: openrouter
  targetRefs:
  - group: aigateway.envoyproxy.io
    kind: AIServiceBackend
    name: openrouter
`

const gateway = `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: inference-gateway
  namespace: modelplane-system
spec:
  gatewayClassName: envoy
  listeners:
  - name: http
    port: 80
    protocol: HTTP
`

const object = `
apiVersion: kubernetes.m.crossplane.io/v1alpha1
kind: Object
metadata:
  generateName: inference-gateway-
  namespace: modelplane-system
spec:
  providerConfigRef:
    kind: ClusterProviderConfig
    name: gpu-cluster-1
  forProvider:
    manifest:
      apiVersion: v1
      kind: Secret
      metadata:
        name: openrouter
        namespace: ml-team
      stringData:
        api-key: sk-test
`

// TestValidate checks that each kind of check the package promises can
// fail, each on one change to an object that is otherwise valid.
// httpRoute is an HTTPRoute as AI Gateway generates it for a model: one
// rule with every backend of the model.
const httpRoute = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: qwen3-8b
  namespace: mp-ml-team-b38f9
spec:
  parentRefs:
  - name: inference-gateway
    namespace: modelplane-system
  rules:
  - backendRefs:
    - group: gateway.envoyproxy.io
      kind: Backend
      name: qwen3-8b-vllm
`

// clientTrafficPolicy is the gateway's ClientTrafficPolicy.
const clientTrafficPolicy = `
apiVersion: gateway.envoyproxy.io/v1alpha1
kind: ClientTrafficPolicy
metadata:
  name: inference-gateway-client
  namespace: modelplane-system
spec:
  targetRefs:
  - group: gateway.networking.k8s.io
    kind: Gateway
    name: inference-gateway
  connection:
    bufferLimit: 50Mi
  http2:
    initialStreamWindowSize: 16Mi
    initialConnectionWindowSize: 24Mi
`

func TestValidate(t *testing.T) {
	v := upstream(t)
	cases := map[string]struct {
		reason string
		in     string
		change func(m map[string]any)
		// want are substrings of the errors, one per expected error.
		want []string
	}{
		"ValidAIGatewayRoute": {
			reason: "The unchanged AIGatewayRoute is valid, so the cases below fail for their change alone.",
			in:     aiGatewayRoute,
		},
		"ValidBackendSecurityPolicy": {
			reason: "The unchanged BackendSecurityPolicy is valid.",
			in:     backendSecurityPolicy,
		},
		"ValidGateway": {
			reason: "The unchanged Gateway is valid.",
			in:     gateway,
		},
		"ValidHTTPRoute": {
			reason: "The unchanged HTTPRoute is valid.",
			in:     httpRoute,
		},
		"SixteenBackendRefs": {
			reason: "Gateway API allows 16 backendRefs in an HTTPRoute rule: a model's 16 backends fit.",
			in:     httpRoute,
			change: func(m map[string]any) { setBackendRefs(m, 16) },
		},
		"SeventeenBackendRefs": {
			reason: "A 17th backendRef breaks the rule's MaxItems, so AI Gateway's HTTPRoute for a 17-backend model is refused: why ModelRoute caps backends at 16.",
			in:     httpRoute,
			change: func(m map[string]any) { setBackendRefs(m, 17) },
			want:   []string{"spec.rules[0].backendRefs: Too many: 17: must have at most 16 items", skippedCEL},
		},
		"ValidClientTrafficPolicy": {
			reason: "The gateway's ClientTrafficPolicy with its 50Mi buffer is valid.",
			in:     clientTrafficPolicy,
		},
		"BufferLimitNotAQuantity": {
			reason: "Envoy Gateway's CRD wants a quantity for the buffer limit.",
			in:     clientTrafficPolicy,
			change: func(m map[string]any) {
				m["spec"].(map[string]any)["connection"].(map[string]any)["bufferLimit"] = "lots"
			},
			want: []string{
				`spec.connection.bufferLimit: Invalid value: "lots": spec.connection.bufferLimit in body should match '^(\+|-)?`,
				`spec.connection.bufferLimit: Invalid value: "lots": spec.connection.bufferLimit in body should match '^[1-9]+[0-9]*([EPTGMK]i|[EPTGMk])?$'`,
				`"spec.connection.bufferLimit" must validate all the schemas (allOf)`,
			},
		},
		"TooManyRules": {
			reason: "AIGatewayRoute allows at most 15 rules (OpenAPI maxItems).",
			in:     aiGatewayRoute,
			change: func(m map[string]any) {
				spec := m["spec"].(map[string]any)
				rule := spec["rules"].([]any)[0]
				rules := make([]any, 16)
				for i := range rules {
					rules[i] = rule
				}
				spec["rules"] = rules
			},
			want: []string{"spec.rules: Too many: 16: must have at most 15 items", skippedCEL},
		},
		"ParentRefNotAGateway": {
			reason: "AIGatewayRoute's CEL rule only admits Gateway parents.",
			in:     aiGatewayRoute,
			change: func(m map[string]any) {
				ref := m["spec"].(map[string]any)["parentRefs"].([]any)[0].(map[string]any)
				ref["kind"] = "HTTPRoute"
			},
			want: []string{"spec.parentRefs: Invalid value: only Gateway is supported"},
		},
		"SecurityPolicyTypeMismatch": {
			reason: "BackendSecurityPolicy's CEL rule wants exactly the sub-struct its type names. (Adding anthropicAPIKey next to apiKey would break maxProperties first, and the API server skips CEL rules after that.)",
			in:     backendSecurityPolicy,
			change: func(m map[string]any) {
				spec := m["spec"].(map[string]any)
				spec["anthropicAPIKey"] = spec["apiKey"]
				delete(spec, "apiKey")
			},
			want: []string{"When type is APIKey, only apiKey field should be set"},
		},
		"UnknownSpecField": {
			reason: "A field the schema lacks is reported, not silently pruned.",
			in:     aiGatewayRoute,
			change: func(m map[string]any) {
				m["spec"].(map[string]any)["llmRequestCost"] = []any{}
			},
			want: []string{"spec.llmRequestCost: Forbidden: unknown field"},
		},
		"UnknownNestedField": {
			reason: "Unknown fields are found at any depth, with their path.",
			in:     aiGatewayRoute,
			change: func(m map[string]any) {
				rule := m["spec"].(map[string]any)["rules"].([]any)[0].(map[string]any)
				rule["backendRefs"].([]any)[0].(map[string]any)["wieght"] = int64(1)
			},
			want: []string{"spec.rules[0].backendRefs[0].wieght: Forbidden: unknown field"},
		},
		"UnknownMetadataField": {
			reason: "Unknown ObjectMeta fields are reported too.",
			in:     gateway,
			change: func(m map[string]any) {
				m["metadata"].(map[string]any)["label"] = map[string]any{"a": "b"}
			},
			want: []string{"metadata.label: Forbidden: unknown field"},
		},
		"WrongType": {
			reason: "OpenAPI schema validation catches a value of the wrong type.",
			in:     gateway,
			change: func(m map[string]any) {
				m["spec"].(map[string]any)["listeners"].([]any)[0].(map[string]any)["port"] = "eighty"
			},
			want: []string{"spec.listeners[0].port: Invalid value: \"string\": spec.listeners[0].port in body must be of type integer", skippedCEL},
		},
		"DuplicateListMapKey": {
			reason: "Gateway listeners are a list-map keyed by name; two with one name break it.",
			in:     gateway,
			change: func(m map[string]any) {
				spec := m["spec"].(map[string]any)
				l := spec["listeners"].([]any)[0].(map[string]any)
				other := map[string]any{"name": l["name"], "port": int64(8080), "protocol": "HTTP"}
				spec["listeners"] = append(spec["listeners"].([]any), other)
			},
			want: []string{"spec.listeners[1]: Duplicate value: {\"name\":\"http\"}", "spec.listeners: Invalid value: Listener name must be unique within the Gateway"},
		},
		"InvalidName": {
			reason: "ObjectMeta validation applies the API server's name rule.",
			in:     backendSecurityPolicy,
			change: func(m map[string]any) {
				m["metadata"].(map[string]any)["name"] = "Open_Router"
			},
			want: []string{"metadata.name: Invalid value: \"Open_Router\""},
		},
		"MissingNamespace": {
			reason: "A namespaced kind needs a namespace.",
			in:     gateway,
			change: func(m map[string]any) {
				delete(m["metadata"].(map[string]any), "namespace")
			},
			want: []string{"metadata.namespace: Required value", skippedCEL},
		},
		"UnknownVersion": {
			reason: "A version no CRD defines cannot pass.",
			in:     aiGatewayRoute,
			change: func(m map[string]any) {
				m["apiVersion"] = "gateway.networking.k8s.io/v1alpha9"
				m["kind"] = "Gateway"
			},
			want: []string{"kind: Invalid value: \"Gateway\": no CRD defines this kind in gateway.networking.k8s.io/v1alpha9"},
		},
		"UnknownKind": {
			reason: "A kind with neither a CRD nor core support cannot pass.",
			in:     gateway,
			change: func(m map[string]any) {
				m["apiVersion"] = "v1"
				m["kind"] = "PodTemplate"
			},
			want: []string{"kind: Invalid value: \"PodTemplate\": no CRD defines this kind in v1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := obj(t, tc.in)
			if tc.change != nil {
				tc.change(m)
			}
			_, errs := v.Validate(context.Background(), m)
			if diff := cmp.Diff(tc.want, matches(errs, tc.want)); diff != "" {
				t.Errorf("%s\nValidate(...): -want errors, +got errors:\n%s\nall errors:\n%s", tc.reason, diff, list(errs))
			}
		})
	}
}

// setBackendRefs gives an HTTPRoute's first rule n backendRefs.
func setBackendRefs(m map[string]any, n int) {
	refs := make([]any, n)
	for i := range refs {
		refs[i] = map[string]any{"group": "gateway.envoyproxy.io", "kind": "Backend", "name": fmt.Sprintf("qwen3-8b-b%d", i)}
	}
	m["spec"].(map[string]any)["rules"].([]any)[0].(map[string]any)["backendRefs"] = refs
}

// TestValidateComposed checks that a provider-kubernetes Object is
// validated, and so is the manifest it wraps, with the manifest's path.
func TestValidateComposed(t *testing.T) {
	v := upstream(t)
	cases := map[string]struct {
		reason string
		change func(m map[string]any)
		want   []string
	}{
		"Valid": {
			reason: "The unchanged Object, and its Secret, are valid.",
		},
		"UnknownObjectField": {
			reason: "An unknown field of the Object itself is reported.",
			change: func(m map[string]any) {
				m["spec"].(map[string]any)["deletionPolicy"] = "Orphan"
			},
			want: []string{"spec.deletionPolicy: Forbidden: unknown field"},
		},
		"ProviderConfigRefWithoutName": {
			reason: "The Object's own schema applies: providerConfigRef needs a name.",
			change: func(m map[string]any) {
				delete(m["spec"].(map[string]any)["providerConfigRef"].(map[string]any), "name")
			},
			want: []string{"spec.providerConfigRef.name: Required value", skippedCEL},
		},
		"UnknownManifestField": {
			reason: "The manifest of a core kind must decode strictly into its type.",
			change: func(m map[string]any) {
				manifest(m)["strinData"] = map[string]any{"a": "b"}
			},
			want: []string{"spec.forProvider.manifest: Forbidden: unknown field \"strinData\""},
		},
		"UnknownCRDManifestField": {
			reason: "An unknown field in a manifest of a CRD kind is reported at its full path.",
			change: func(m map[string]any) {
				r := obj(t, aiGatewayRoute)
				r["spec"].(map[string]any)["targetRefs"] = []any{}
				m["spec"].(map[string]any)["forProvider"].(map[string]any)["manifest"] = r
			},
			want: []string{"spec.forProvider.manifest.spec.targetRefs: Forbidden: unknown field"},
		},
		"BadManifestKey": {
			reason: "A Secret's keys must be valid ConfigMap keys.",
			change: func(m map[string]any) {
				manifest(m)["stringData"] = map[string]any{"api key": "x"}
			},
			want: []string{"spec.forProvider.manifest.stringData[api key]: Invalid value: \"api key\""},
		},
		"ManifestWrongType": {
			reason: "A value of the wrong type in a core manifest fails decoding.",
			change: func(m map[string]any) {
				manifest(m)["immutable"] = "yes"
			},
			want: []string{"spec.forProvider.manifest: Invalid value: null: cannot decode"},
		},
		"CRDManifest": {
			reason: "A manifest of a CRD kind is validated against that CRD, CEL included, at the manifest's path.",
			change: func(m map[string]any) {
				r := obj(t, aiGatewayRoute)
				r["spec"].(map[string]any)["parentRefs"].([]any)[0].(map[string]any)["kind"] = "Service"
				m["spec"].(map[string]any)["forProvider"].(map[string]any)["manifest"] = r
			},
			want: []string{"spec.forProvider.manifest.spec.parentRefs: Invalid value: only Gateway is supported"},
		},
		"NamespaceName": {
			reason: "A Namespace's name must be a DNS label, and it has no namespace.",
			change: func(m map[string]any) {
				m["spec"].(map[string]any)["forProvider"].(map[string]any)["manifest"] = map[string]any{
					"apiVersion": "v1", "kind": "Namespace",
					"metadata": map[string]any{"name": "ml.team"},
				}
			},
			want: []string{"spec.forProvider.manifest.metadata.name: Invalid value: \"ml.team\""},
		},
		"NoManifest": {
			reason: "An Object without a manifest is useless.",
			change: func(m map[string]any) {
				delete(m["spec"].(map[string]any), "forProvider")
			},
			want: []string{"spec.forProvider: Required value", skippedCEL, "spec.forProvider.manifest: Required value"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := obj(t, object)
			if tc.change != nil {
				tc.change(m)
			}
			errs := v.ValidateComposed(context.Background(), m)
			if diff := cmp.Diff(tc.want, matches(errs, tc.want)); diff != "" {
				t.Errorf("%s\nValidateComposed(...): -want errors, +got errors:\n%s\nall errors:\n%s", tc.reason, diff, list(errs))
			}
		})
	}
}

// TestValidateDefaults checks that defaults are applied before validation,
// as the API server applies them: a Gateway listener without allowedRoutes
// gets the CRD's default.
func TestValidateDefaults(t *testing.T) {
	v := upstream(t)
	out, errs := v.Validate(context.Background(), obj(t, gateway))
	if len(errs) != 0 {
		t.Fatalf("Validate(...): %s", list(errs))
	}
	l := out["spec"].(map[string]any)["listeners"].([]any)[0].(map[string]any)
	want := map[string]any{"namespaces": map[string]any{"from": "Same"}}
	if diff := cmp.Diff(want, l["allowedRoutes"]); diff != "" {
		t.Errorf("Validate(...): the listener's allowedRoutes after defaulting: -want, +got:\n%s", diff)
	}
}

// TestValidateCost reports how long validating one object takes once its
// CRD is compiled. It asserts nothing about time.
func TestValidateCost(t *testing.T) {
	v := upstream(t)
	for _, in := range []string{aiGatewayRoute, backendSecurityPolicy, gateway, object} {
		m := obj(t, in)
		start := time.Now()
		v.ValidateComposed(context.Background(), m) // compiles the CRD
		first := time.Since(start)
		const n = 20
		start = time.Now()
		for range n {
			if errs := v.ValidateComposed(context.Background(), m); len(errs) != 0 {
				t.Fatalf("ValidateComposed(%s): %s", m["kind"], list(errs))
			}
		}
		t.Logf("%s: first %s (compiles the CRD), then %s each", m["kind"], first, time.Since(start)/n)
	}
}

// TestLoadIndexesWhatParsingFinds checks Load's line scan against a full
// parse of every upstream CRD file: both must find the same kinds, and
// each kind's file must parse when first used.
func TestLoadIndexesWhatParsingFinds(t *testing.T) {
	lazy := upstream(t)
	root, err := toolchain.Root()
	if err != nil {
		t.Fatal(err)
	}
	crds, err := ReadSources(context.Background(), root, Sources...)
	if err != nil {
		t.Fatal(err)
	}
	eager, err := New(crds)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(eager.Kinds(), lazy.Kinds()); diff != "" {
		t.Fatalf("Load(...).Kinds(): -parsed, +scanned:\n%s", diff)
	}
	for gvk := range eager.versions {
		cv, err := lazy.lookup(gvk)
		if err != nil || cv == nil {
			t.Errorf("Load(...): cannot find %s after parsing its file: %v", gvk, err)
		}
	}
}

func TestNewRejectsDuplicateKinds(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal([]byte(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.example.org
spec:
  group: example.org
  names: {kind: Thing, plural: things}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object}
`), crd); err != nil {
		t.Fatal(err)
	}
	_, err := New([]*apiextensionsv1.CustomResourceDefinition{crd, crd})
	if err == nil || !strings.Contains(err.Error(), "example.org/v1, Kind=Thing is already defined") {
		t.Errorf("New(two CRDs of one kind): got error %v, want one naming the kind", err)
	}
}

func TestScan(t *testing.T) {
	cases := map[string]struct {
		in     string
		want   []schema.GroupKind
		wantOK bool
	}{
		"TwoCRDs": {
			in: `# a comment
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.example.org
spec:
  group: example.org
  names:
    categories:
    - stuff
    kind: Thing
    plural: things
  scope: Namespaced
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
spec:
  group: "other.example.org"
  names:
    kind: Other
`,
			want:   []schema.GroupKind{{Group: "example.org", Kind: "Thing"}, {Group: "other.example.org", Kind: "Other"}},
			wantOK: true,
		},
		"NotACRD": {
			in:     "apiVersion: v1\nkind: ConfigMap\nspec:\n  group: x\n",
			wantOK: true,
		},
		"FlowStyle": {
			in:     "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nspec: {group: example.org, names: {kind: Thing}}\n",
			wantOK: false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := scan([]byte(tc.in))
			if ok != tc.wantOK {
				t.Fatalf("scan(...): ok %t, want %t", ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("scan(...): -want, +got:\n%s", diff)
			}
		})
	}
}

func TestStripHelmGuards(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    string
		wantErr bool
	}{
		"NoTemplating": {
			in:   "a: 1\n",
			want: "a: 1\n",
		},
		"Guards": {
			in:   "{{- if .Values.crds.envoyGateway.enabled }}\n---\na: 1\n{{- end }}\n",
			want: "---\na: 1\n",
		},
		"TemplatingInsideADocument": {
			in:      "a: {{ .Values.x }}\n",
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := stripHelmGuards([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("stripHelmGuards(%q): error %v, want error: %t", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("stripHelmGuards(%q): -want, +got:\n%s", tc.in, diff)
			}
		})
	}
}

// matches returns, for each wanted substring, the first error that holds
// it, or "(missing) ..." when none does, followed by every error that
// matched no wanted substring. With no errors and no wants it is empty, so
// cmp.Diff against the wants shows missing and unexpected errors alike.
func matches(errs field.ErrorList, want []string) []string {
	used := make([]bool, len(errs))
	var out []string
	for _, w := range want {
		found := false
		for i, e := range errs {
			if !used[i] && strings.Contains(e.Error(), w) {
				used[i], found = true, true
				out = append(out, w)
				break
			}
		}
		if !found {
			out = append(out, "(missing) "+w)
		}
	}
	for i, e := range errs {
		if !used[i] {
			out = append(out, "(unexpected) "+e.Error())
		}
	}
	return out
}

func list(errs field.ErrorList) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "  %v\n", e)
	}
	return b.String()
}

func manifest(m map[string]any) map[string]any {
	return m["spec"].(map[string]any)["forProvider"].(map[string]any)["manifest"].(map[string]any)
}
