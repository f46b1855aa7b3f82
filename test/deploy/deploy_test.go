// Package deploy checks the manifests of deploy/control-plane against the
// upstream CRDs of the kinds they hold, and against each other and the
// Configuration package: the names and packages a platform team applies
// must be the ones the Compositions and the Configuration's dependencies
// expect.
package deploy

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/test/e2e/validate"
	"github.com/modelplaneai/function-inference-gateway/test/internal/manifests"
	"github.com/modelplaneai/function-inference-gateway/test/internal/toolchain"
)

// dir is deploy/control-plane, relative to the repository root.
var dir = filepath.Join("deploy", "control-plane")

// crossplaneCRDs are Crossplane's package CRDs (Provider, Function,
// Configuration, DeploymentRuntimeConfig) of the version the suites run.
// The crossplane module is in test/tools' go.mod, not the function's.
var crossplaneCRDs = validate.Source{Module: "github.com/crossplane/crossplane/v2", Version: toolchain.CrossplaneVersion, Glob: "cluster/crds/pkg.crossplane.io_*.yaml"}

// object is one manifest of deploy/control-plane and its file.
type object struct {
	file string
	*unstructured.Unstructured
}

func TestControlPlaneManifests(t *testing.T) {
	root, err := toolchain.Root()
	if err != nil {
		t.Fatal(err)
	}
	objs := readDir(t, filepath.Join(root, dir))

	t.Run("Kustomization", func(t *testing.T) {
		// Every manifest is in the kustomization, in install order: the
		// runtime config before the Provider that names it, the Function
		// before the Configuration that depends on it.
		k := readFile(t, filepath.Join(root, dir, "kustomization.yaml"))
		if len(k) != 1 {
			t.Fatalf("kustomization.yaml holds %d objects, want 1", len(k))
		}
		got, _, err := unstructured.NestedStringSlice(k[0].Object, "resources")
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"runtime-config.yaml", "provider.yaml", "providerconfig.yaml", "function.yaml", "configuration.yaml"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("kustomization.yaml's resources: -want, +got:\n%s", diff)
		}
		var files []string
		for _, o := range objs {
			files = append(files, o.file)
		}
		slices.Sort(files)
		slices.Sort(want)
		if diff := cmp.Diff(want, slices.Compact(files)); diff != "" {
			t.Errorf("the manifests in %s and the kustomization's resources differ: -kustomization, +folder:\n%s", dir, diff)
		}
	})

	ctx := context.Background()
	xp, err := validate.ReadSources(ctx, filepath.Join(root, "test", "tools"), crossplaneCRDs)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := validate.ReadSources(ctx, root, providerKubernetes(t))
	if err != nil {
		t.Fatal(err)
	}
	v, err := validate.New(slices.Concat(xp, pk))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("UpstreamSchemas", func(t *testing.T) {
		for _, o := range objs {
			t.Run(o.file+"/"+o.GetKind(), func(t *testing.T) {
				if _, errs := v.Validate(ctx, o.Object); len(errs) > 0 {
					t.Errorf("%s %s is invalid against its upstream CRD: %v", o.GetKind(), o.GetName(), errs.ToAggregate())
				}
			})
		}
	})

	t.Run("SchemasReject", func(t *testing.T) {
		// The same validation must reject broken manifests, or the check
		// above proves nothing.
		cases := map[string]struct {
			file   string
			kind   string
			mutate func(u *unstructured.Unstructured)
			want   string
		}{
			"UnknownField": {
				file: "provider.yaml",
				kind: "Provider",
				mutate: func(u *unstructured.Unstructured) {
					u.Object["spec"].(map[string]any)["runtimeConfig"] = "provider-kubernetes"
				},
				want: "spec.runtimeConfig: Forbidden: unknown field",
			},
			"BadEnum": {
				file: "providerconfig.yaml",
				kind: "ClusterProviderConfig",
				mutate: func(u *unstructured.Unstructured) {
					must(t, unstructured.SetNestedField(u.Object, "File", "spec", "credentials", "source"))
				},
				want: `spec.credentials.source: Unsupported value: "File"`,
			},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				u := find(t, objs, tc.file, tc.kind).DeepCopy()
				tc.mutate(u)
				_, errs := v.Validate(ctx, u.Object)
				if got := errs.ToAggregate(); got == nil || !strings.Contains(got.Error(), tc.want) {
					t.Errorf("Validate(broken %s): got %v, want an error containing %q", tc.file, got, tc.want)
				}
			})
		}
	})

	t.Run("Consistent", func(t *testing.T) {
		testConsistent(t, root, objs)
	})
}

// testConsistent checks the manifests against each other and against the
// Configuration package and its Compositions.
func testConsistent(t *testing.T, root string, objs []object) {
	t.Helper()
	runtimeConfig := find(t, objs, "runtime-config.yaml", "DeploymentRuntimeConfig")
	provider := find(t, objs, "provider.yaml", "Provider")
	function := find(t, objs, "function.yaml", "Function")
	functionRuntime := find(t, objs, "function.yaml", "DeploymentRuntimeConfig")
	configuration := find(t, objs, "configuration.yaml", "Configuration")

	meta := readFile(t, filepath.Join(root, "package", "configuration", "crossplane.yaml"))[0]
	deps, _, err := unstructured.NestedSlice(meta.Object, "spec", "dependsOn")
	if err != nil {
		t.Fatal(err)
	}
	dependency := func(kind string) (pkg, version string) {
		for _, d := range deps {
			m := d.(map[string]any)
			if m["kind"] == kind {
				return m["package"].(string), m["version"].(string)
			}
		}
		t.Fatalf("the Configuration does not depend on a %s", kind)
		return "", ""
	}
	var functionRefs []string
	for _, kind := range []string{"gateway", "route"} {
		for _, c := range readFile(t, filepath.Join(root, "package", "configuration", kind, "composition.yaml")) {
			steps, _, _ := unstructured.NestedSlice(c.Object, "spec", "pipeline")
			for _, s := range steps {
				n, _, _ := unstructured.NestedString(s.(map[string]any), "functionRef", "name")
				functionRefs = append(functionRefs, n)
			}
		}
	}

	var args []string
	containers, _, _ := unstructured.NestedSlice(runtimeConfig.Object, "spec", "deploymentTemplate", "spec", "template", "spec", "containers")
	for _, c := range containers {
		m := c.(map[string]any)
		// Crossplane merges the container of this name into the provider's
		// (crossplane v2.3.0 and v2.2.0
		// internal/controller/pkg/runtime/runtime.go, ContainerName).
		if m["name"] == "package-runtime" {
			a, _, _ := unstructured.NestedStringSlice(m, "args")
			args = append(args, a...)
		}
	}
	runtimeConfigRef, _, _ := unstructured.NestedString(provider.Object, "spec", "runtimeConfigRef", "name")
	functionRuntimeRef, _, _ := unstructured.NestedString(function.Object, "spec", "runtimeConfigRef", "name")
	providerPkg, _, _ := unstructured.NestedString(provider.Object, "spec", "package")
	functionPkg, _, _ := unstructured.NestedString(function.Object, "spec", "package")
	configurationPkg, _, _ := unstructured.NestedString(configuration.Object, "spec", "package")
	providerDep, _ := dependency("Provider")
	functionDep, functionVersion := dependency("Function")

	cases := map[string]struct {
		reason    string
		got, want any
	}{
		"ProviderFlags": {
			reason: "provider-kubernetes must run with watches (the Objects' spec.watch) and sanitized Secrets (the Input's providerSanitizesSecrets).",
			got:    args, want: []string{"--enable-watches", "--sanitize-secrets"},
		},
		"RuntimeConfigRef": {
			reason: "The Provider runs with the runtime config.",
			got:    runtimeConfigRef, want: runtimeConfig.GetName(),
		},
		"FunctionRuntimeConfigRef": {
			reason: "The Function runs with its runtime config.",
			got:    functionRuntimeRef, want: functionRuntime.GetName(),
		},
		"ProviderPackage": {
			reason: "The Provider is the Configuration's dependency, at the version the control-plane suite runs by default.",
			got:    providerPkg, want: providerDep + ":" + toolchain.ProviderKubernetesVersion,
		},
		"FunctionPackage": {
			reason: "The Function is the Configuration's dependency, at the lowest version it accepts.",
			got:    functionPkg, want: repoAndTag(functionDep, functionVersion),
		},
		"ProviderName": {
			reason: "The Provider has the name the Configuration's dependency would give it, so applying it after the Configuration updates that one rather than installing a second.",
			got:    provider.GetName(), want: installedName(providerPkg),
		},
		"FunctionName": {
			reason: "The Function has the name the Compositions' functionRef uses, the one the dependency would give it.",
			got:    []string{function.GetName(), function.GetName()}, want: functionRefs,
		},
		"FunctionNameInstalled": {
			reason: "That name is the one crossplane xpkg install gives the package.",
			got:    function.GetName(), want: installedName(functionPkg),
		},
		"ConfigurationPackage": {
			reason: "The Configuration installed is the one package/configuration builds, in the Function's registry and organization.",
			got:    configurationPkg, want: strings.TrimSuffix(functionDep, "/function-inference-gateway") + "/" + meta.GetName() + ":" + strings.TrimPrefix(functionVersion, ">="),
		},
		"ConfigurationName": {
			reason: "The Configuration has the name crossplane xpkg install gives it.",
			got:    configuration.GetName(), want: installedName(configurationPkg),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// providerKubernetes is the provider-kubernetes CRD source the composed
// output is validated against.
func providerKubernetes(t *testing.T) validate.Source {
	t.Helper()
	for _, s := range validate.Sources {
		if s.Module == "github.com/crossplane-contrib/provider-kubernetes" {
			return s
		}
	}
	t.Fatal("validate.Sources has no provider-kubernetes")
	return validate.Source{}
}

// repoAndTag is the package reference of the lowest version a ">=vX.Y.Z"
// dependency accepts.
func repoAndTag(pkg, constraint string) string {
	return pkg + ":" + strings.TrimPrefix(constraint, ">=")
}

// installedName is the name crossplane xpkg install and the dependency
// resolver give a package: its repository, without registry and tag, made
// a DNS label (crossplane v2.2.0 internal/xpkg/name.go, ToDNSLabel;
// v2.3.0 moved it to crossplane-runtime v2.3.0 pkg/xpkg/name.go). For a
// repository of lower-case letters, digits, dashes and slashes, that
// replaces the slashes with dashes.
func installedName(ref string) string {
	repo := ref
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	_, repo, _ = strings.Cut(repo, "/") // the registry
	return strings.ReplaceAll(repo, "/", "-")
}

// find returns the one object of kind in file.
func find(t *testing.T, objs []object, file, kind string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.file == file && o.GetKind() == kind {
			found = append(found, o.Unstructured)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s holds %d objects of kind %s, want 1", file, len(found), kind)
	}
	return found[0]
}

// readDir returns the objects of every YAML file in dir but the
// kustomization.
func readDir(t *testing.T, dir string) []object {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("cannot find the manifests in %s: %v", dir, err)
	}
	var objs []object
	for _, p := range paths {
		if filepath.Base(p) == "kustomization.yaml" {
			continue
		}
		for _, u := range readFile(t, p) {
			objs = append(objs, object{file: filepath.Base(p), Unstructured: u})
		}
	}
	return objs
}

// readFile returns the objects of a YAML file, numbers as int64 or float64
// as the API server decodes them.
func readFile(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Decode(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return objs
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
