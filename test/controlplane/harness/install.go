package harness

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"github.com/modelplaneai/function-inference-gateway/test/internal/toolchain"
)

// crdSource is a folder of CRD YAML in a Go module.
type crdSource struct {
	module, version, dir string
	// skip reports whether a file is to be left out.
	skip func(name string) bool
	// env is what go mod download needs to fetch the module (tool.goEnv).
	env []string
}

// InstallCRDs installs every CustomResourceDefinition the composed
// resources need, straight from the upstream modules: provider-kubernetes,
// Envoy Gateway, Gateway API and Envoy AI Gateway. The API server then
// validates every composed manifest against the real schemas, CEL rules
// included.
func (c *Cluster) InstallCRDs(ctx context.Context, providerWebhookPort int) {
	sources := []crdSource{
		{module: "github.com/crossplane-contrib/provider-kubernetes", version: c.controllers.provider.Version, dir: "package/crds",
			env: c.controllers.provider.goEnv()},
		// Envoy Gateway's own CRDs. Each file is wrapped in a Helm
		// {{- if ...}} ... {{- end}} pair, which readCRDs drops.
		{module: "github.com/envoyproxy/gateway", version: "v1.8.3", dir: "charts/gateway-crds-helm/templates/generated"},
		// EG's chart carries Gateway API only in templated bundles; the
		// Gateway API module has them plain. The safe-upgrades file is a
		// ValidatingAdmissionPolicy, not a CRD.
		{module: "sigs.k8s.io/gateway-api", version: "v1.5.1", dir: "config/crd/standard",
			skip: func(n string) bool { return strings.Contains(n, "vap_") }},
		{module: "github.com/envoyproxy/ai-gateway", version: "v1.0.0", dir: "manifests/charts/ai-gateway-crds-helm/templates"},
		// cert-manager's, for the gateway's client certificate (the suite's mtls_test.go).
		{module: "github.com/cert-manager/cert-manager", version: certManagerVersion, dir: "deploy/crds"},
	}
	var names []string
	for _, s := range sources {
		dir := filepath.Join(moduleDir(ctx, c.tb, s.module, s.version, s.env...), s.dir)
		for _, crd := range readCRDs(c.tb, dir, s.skip) {
			if crd.GetName() == "objects.kubernetes.crossplane.io" {
				c.pointConversionWebhook(crd, providerWebhookPort)
			}
			c.Create(ctx, gvrCRD, crd)
			names = append(names, crd.GetName())
		}
	}
	for _, n := range names {
		c.waitCRDEstablished(ctx, n)
	}
	c.tb.Logf("installed %d CRDs", len(names))
}

// pointConversionWebhook points the cluster-scoped Object CRD's conversion
// webhook, which upstream reaches through an in-cluster Service, at the
// provider's webhook on loopback, trusting the test CA.
func (c *Cluster) pointConversionWebhook(crd *unstructured.Unstructured, port int) {
	cc := map[string]any{
		"url":      fmt.Sprintf("https://127.0.0.1:%d/convert", port),
		"caBundle": base64.StdEncoding.EncodeToString(c.ca.certPEM),
	}
	Must(c.tb, unstructured.SetNestedMap(crd.Object, cc, "spec", "conversion", "webhook", "clientConfig"))
}

func (c *Cluster) waitCRDEstablished(ctx context.Context, name string) {
	Must(c.tb, WaitFor(ctx, nil, 100*time.Millisecond, "CRD "+name+" Established", func(ctx context.Context) (bool, error) {
		u, err := c.Dyn.Resource(gvrCRD).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return ConditionStatus(u, "Established") == "True", nil
	}))
}

// readCRDs reads every CustomResourceDefinition in the YAML files of dir.
// Lines that are Helm template actions ({{ ... }}) are dropped: the chart
// folders wrap plain CRDs in an if/end pair and template nothing else.
func readCRDs(tb testing.TB, dir string, skip func(string) bool) []*unstructured.Unstructured {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatalf("cannot read CRD folder %s: %v", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") || (skip != nil && skip(e.Name())) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			tb.Fatalf("cannot read %s: %v", e.Name(), err)
		}
		var kept []string
		for l := range strings.SplitSeq(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "{{") {
				continue
			}
			kept = append(kept, l)
		}
		for _, u := range decodeYAML(tb, e.Name(), []byte(strings.Join(kept, "\n"))) {
			if u.GetKind() == "CustomResourceDefinition" {
				out = append(out, u)
			}
		}
	}
	return out
}

// StartCrossplane runs `crossplane core init`, which installs Crossplane's
// CRDs and its Lock, then `crossplane core start` with the External package
// runtime: Crossplane fetches and installs packages but runs no Deployment
// for them, and this test plays the runtime for the function.
func (c *Cluster) StartCrossplane(ctx context.Context) {
	xpDir := moduleDir(ctx, c.tb, "github.com/crossplane/crossplane/v2", c.controllers.crossplane.Version, c.controllers.crossplane.goEnv()...)
	c.Namespace(ctx, crossplaneNS)
	env := []string{"KUBECONFIG=" + c.Kubeconfig} // Crossplane has no --kubeconfig flag
	// On a fresh API server the first init can fail with `no matches for
	// kind "Lock"`: it creates the Lock before discovery has caught up with
	// the CRD it just created. Retrying shortly after succeeds.
	var out, lastErr string
	Must(c.tb, WaitFor(ctx, nil, time.Second, "crossplane core init", func(ctx context.Context) (bool, error) {
		var err error
		defer func() {
			if err != nil && err.Error() != lastErr {
				lastErr = err.Error()
				c.tb.Logf("crossplane core init failed (retrying): %v", err)
			}
		}()
		out, err = c.Procs.run(ctx, env, c.Bins["crossplane"], "core", "init",
			"--enable-webhooks=false", "--cr-ds-path="+filepath.Join(xpDir, "cluster", "crds"),
			"--tlsca-secret-name=crossplane-root-ca",
			"--tls-server-secret-name=crossplane-tls-server",
			"--tls-client-secret-name=crossplane-tls-client")
		if err != nil {
			err = fmt.Errorf("cannot initialize Crossplane: %w: %s", err, headAndTail(out))
			return false, err
		}
		return true, nil
	}))

	// Crossplane's client certificate for mTLS to functions, from the same
	// test CA that signs the function's server certificate.
	certs := c.ca.writeDir(c.tb, filepath.Join(c.Dir, "crossplane-client-certs"), c.ca.client(c.tb, "crossplane"))
	// Crossplane writes fetched packages into the cache folder but does not
	// create it; without it every unpack fails with "io: read/write on
	// closed pipe" (the cache writer's end of a pipe).
	cache := filepath.Join(c.Dir, "xpkg-cache")
	Must(c.tb, os.MkdirAll(cache, 0o755))
	metrics, probe := c.Procs.FreePort(), c.Procs.FreePort()
	c.xpMetrics = metrics
	xp := c.Procs.Start("crossplane", env, c.Bins["crossplane"], "core", "start",
		"--enable-webhooks=false", "--package-runtime=External",
		"--tls-client-certs-dir="+certs,
		"--xpkg-cache-dir="+cache,
		"--metrics-port="+strconv.Itoa(metrics), "--health-probe-port="+strconv.Itoa(probe))
	Must(c.tb, WaitFor(ctx, xp, 200*time.Millisecond, "Crossplane /readyz", func(ctx context.Context) (bool, error) {
		_, err := httpGet(ctx, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/readyz", probe), "")
		return err == nil, err
	}))
}

// StartProvider runs provider-kubernetes against the cluster, with watches
// on so that an Object's spec.watch takes effect (v1.3 defaults the feature
// off, v1.4 on) and with --sanitize-secrets, so that a remote Secret's data never
// lands in an Object's status.atProvider.manifest (object.go,
// setAtProvider). Its own client, for Objects and their references on the
// control plane, stays admin: that is Crossplane's side. Its
// ClusterProviderConfig, deploy/control-plane/providerconfig.yaml as it is,
// points back at the same API server, which plays the gateway cluster,
// with the least-privilege identity of deploy/gateway-cluster-rbac.yaml.
func (c *Cluster) StartProvider(ctx context.Context, webhookPort int) {
	c.providerCerts = c.ca.writeDir(c.tb, filepath.Join(c.Dir, "provider-certs"), c.ca.server(c.tb, "provider-kubernetes"))
	c.providerWebhook = webhookPort
	c.runProvider(ctx, true)

	user, token := c.gatewayIdentity(ctx)
	c.GatewayUser = user
	// deploy/control-plane/providerconfig.yaml, applied as it is: the
	// Secret it names gets a kubeconfig for the gateway identity.
	cpcs := c.ReadYAMLFile(providerConfigFile)
	if len(cpcs) != 1 || cpcs[0].GetName() != providerConfigName {
		c.tb.Fatalf("cannot use %s: want one ClusterProviderConfig named %s, the name the example XRs use", providerConfigFile, providerConfigName)
	}
	ref, _, err := unstructured.NestedStringMap(cpcs[0].Object, "spec", "credentials", "secretRef")
	Must(c.tb, err)
	if ref["name"] == "" || ref["namespace"] == "" || ref["key"] == "" {
		c.tb.Fatalf("cannot use %s: its spec.credentials.secretRef must name a Secret's namespace, name and key, got %v", providerConfigFile, ref)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: ref["name"], Namespace: ref["namespace"]},
		Data:       map[string][]byte{ref["key"]: c.kubeconfigFor(fmt.Sprintf("https://127.0.0.1:%d", c.apiPort), user, token)},
	}
	c.createTyped(ctx, GVRSecret, secret, "v1", "Secret")
	c.Apply(ctx, cpcs...)
}

// runProvider starts provider-kubernetes' process with watches on or off,
// always said explicitly: the default is off up to v1.3.1 and on from v1.4
// (v1.4.1 cmd/provider/main.go, enable-watches). Off is --no-enable-watches:
// the flag parser (kingpin v2.4.0 parser.go, Next, and flags.go, parse)
// takes --enable-watches=false as --enable-watches followed by a stray
// argument "false", and refuses it. It waits until the provider is ready.
func (c *Cluster) runProvider(ctx context.Context, watches bool) {
	c.tb.Helper()
	probe := c.Procs.FreePort()
	args := []string{
		"--sanitize-secrets",
		"--webhook-port=" + strconv.Itoa(c.providerWebhook),
		"--metrics-bind-address=" + fmt.Sprintf("127.0.0.1:%d", c.Procs.FreePort()),
		"--health-probe-bind-addr=" + fmt.Sprintf("127.0.0.1:%d", probe),
	}
	if watches {
		args = append(args, "--enable-watches")
	} else {
		args = append(args, "--no-enable-watches")
	}
	c.Provider = c.Procs.Start("provider-kubernetes",
		[]string{"KUBECONFIG=" + c.Kubeconfig, "TLS_SERVER_CERTS_DIR=" + c.providerCerts},
		c.Bins["provider-kubernetes"], args...)
	Must(c.tb, WaitFor(ctx, c.Provider, 200*time.Millisecond, "provider-kubernetes /readyz", func(ctx context.Context) (bool, error) {
		_, err := httpGet(ctx, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/readyz", probe), "")
		return err == nil, err
	}))
}

// RestartProvider stops provider-kubernetes and starts it again, with
// watches or without them, as a platform team that changes its
// DeploymentRuntimeConfig would.
func (c *Cluster) RestartProvider(ctx context.Context, watches bool) {
	c.tb.Helper()
	c.Provider.Stop(10 * time.Second)
	c.runProvider(ctx, watches)
}

// InstallFunction builds this function and its package, serves the
// function over mTLS, pushes the package to a local registry, and installs
// it as a Function. Crossplane's External runtime never sets the revision's
// endpoint, so the test does what a runtime controller would: it points the
// FunctionRevision at the function and reports the runtime healthy.
// functionFlags returns the go build flags of the function under test.
func (c *Cluster) InstallFunction(ctx context.Context, functionFlags func(tb testing.TB, root, dir string) []string) {
	// The function, over mTLS with a server certificate for 127.0.0.1.
	bin, err := toolchain.Function(c.Dir, functionFlags(c.tb, c.root, c.Dir)...)
	Must(c.tb, err)
	certs := c.ca.writeDir(c.tb, filepath.Join(c.Dir, "function-certs"), c.ca.server(c.tb, functionName))
	c.FunctionPort = c.Procs.FreePort()
	fn := c.Procs.Start("function", nil, bin,
		"--tls-certs-dir="+certs, fmt.Sprintf("--address=127.0.0.1:%d", c.FunctionPort), "--debug")
	Must(c.tb, WaitFor(ctx, fn, 100*time.Millisecond, "the function's gRPC port", Listening(c.FunctionPort)))

	// The registry: crane's in-memory OCI registry, plain HTTP on loopback.
	// go-containerregistry, which both crane and Crossplane use, talks
	// plain HTTP to a 127.0.0.1 registry without further configuration.
	regPort := c.Procs.FreePort()
	c.registry = fmt.Sprintf("127.0.0.1:%d", regPort)
	reg := c.Procs.Start("registry", nil, c.Bins["crane"], "registry", "serve", "--address="+c.registry)
	Must(c.tb, WaitFor(ctx, reg, 100*time.Millisecond, "the registry", Listening(regPort)))

	// The package: the repository's package/crossplane.yaml (and the
	// Input CRD beside it) when it is there, a minimal meta otherwise. It
	// carries no runtime image: nothing runs one here.
	pkgRoot := filepath.Join(c.Dir, "package")
	Must(c.tb, os.MkdirAll(pkgRoot, 0o755))
	if b, err := os.ReadFile(filepath.Join(c.root, "package", "crossplane.yaml")); err == nil {
		WriteFile(c.tb, filepath.Join(pkgRoot, "crossplane.yaml"), b)
	} else {
		WriteFile(c.tb, filepath.Join(pkgRoot, "crossplane.yaml"), []byte(`apiVersion: meta.pkg.crossplane.io/v1
kind: Function
metadata:
  name: `+functionName+`
spec:
  capabilities: [composition]
`))
	}
	xpkg := filepath.Join(c.Dir, "function.xpkg")
	out, err := c.Procs.run(ctx, nil, c.Bins["crossplane-cli"], "xpkg", "build",
		"--package-root="+pkgRoot, "--examples-root="+filepath.Join(c.Dir, "no-examples"), "--package-file="+xpkg)
	if err != nil {
		c.tb.Fatalf("cannot build the function package: %v\n%s", err, out)
	}
	c.functionPkg = c.registry + "/" + functionRepository + ":v0.1.0"
	if out, err := c.Procs.run(ctx, nil, c.Bins["crane"], "push", "--insecure", xpkg, c.functionPkg); err != nil {
		c.tb.Fatalf("cannot push the function package: %v\n%s", err, out)
	}

	// The Secret a runtime would hold the function's server certificate
	// in; the revision's status names it.
	tlsSecret := functionName + "-tls-server"
	kp, err := os.ReadFile(filepath.Join(certs, "tls.crt"))
	Must(c.tb, err)
	c.createTyped(ctx, GVRSecret, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: tlsSecret, Namespace: crossplaneNS},
		Data:       map[string][]byte{"tls.crt": kp, "ca.crt": c.ca.certPEM},
	}, "v1", "Secret")

	c.Create(ctx, gvrFunction, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pkg.crossplane.io/v1",
		"kind":       "Function",
		"metadata":   map[string]any{"name": functionName},
		"spec":       map[string]any{"package": c.functionPkg},
	}})

	// Play the runtime: once the package manager has made the active
	// revision, give it the endpoint and a RuntimeHealthy condition, the
	// two things Crossplane's Deployment runtime would have set.
	var rev string
	Must(c.tb, WaitFor(ctx, nil, 200*time.Millisecond, "an active FunctionRevision", func(ctx context.Context) (bool, error) {
		l, err := c.Dyn.Resource(gvrFunctionRev).List(ctx, metav1.ListOptions{LabelSelector: "pkg.crossplane.io/package=" + functionName})
		if err != nil {
			return false, err
		}
		for _, r := range l.Items {
			if s, _, _ := unstructured.NestedString(r.Object, "spec", "desiredState"); s == "Active" {
				rev = r.GetName()
				return true, nil
			}
		}
		return false, nil
	}))
	Must(c.tb, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r, err := c.Dyn.Resource(gvrFunctionRev).Get(ctx, rev, metav1.GetOptions{})
		if err != nil {
			return err
		}
		Must(c.tb, unstructured.SetNestedField(r.Object, fmt.Sprintf("dns:///127.0.0.1:%d", c.FunctionPort), "status", "endpoint"))
		Must(c.tb, unstructured.SetNestedField(r.Object, tlsSecret, "status", "tlsServerSecretName"))
		SetCondition(r, map[string]any{
			"type": "RuntimeHealthy", "status": "True", "reason": "HealthyPackageRevision",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
		})
		_, err = c.Dyn.Resource(gvrFunctionRev).UpdateStatus(ctx, r, metav1.UpdateOptions{})
		return err
	}))
	Must(c.tb, WaitFor(ctx, fn, 200*time.Millisecond, "Function Installed and Healthy", func(ctx context.Context) (bool, error) {
		f, err := c.Dyn.Resource(gvrFunction).Get(ctx, functionName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if ConditionStatus(f, "Installed") == "True" && ConditionStatus(f, "Healthy") == "True" {
			return true, nil
		}
		return false, fmt.Errorf("cannot see the Function installed and healthy yet: %s", ConditionsSummary(f))
	}))
}

// InstallExamples installs the XRDs and Compositions the Configuration
// package ships, package/configuration/<kind>/, as they are but for the
// Input's gatewayNamespace, and waits until Crossplane serves both XR kinds.
func (c *Cluster) InstallExamples(ctx context.Context) {
	for _, kind := range []string{"gateway", "route"} {
		c.Apply(ctx, c.ReadYAMLFile(filepath.Join(configurationDir, kind, "xrd.yaml"))...)
	}
	for _, name := range []string{"inferencegateways.modelplane.ai", "modelroutes.modelplane.ai"} {
		Must(c.tb, WaitFor(ctx, nil, 200*time.Millisecond, "XRD "+name+" Established", func(ctx context.Context) (bool, error) {
			u, err := c.Dyn.Resource(gvrXRD).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return ConditionStatus(u, "Established") == "True", nil
		}))
	}
	for _, kind := range []string{"gateway", "route"} {
		comps := c.ReadYAMLFile(filepath.Join(configurationDir, kind, "composition.yaml"))
		for _, u := range comps {
			c.setGatewayNamespace(u)
		}
		c.Apply(ctx, comps...)
	}
}

// DryRunControlPlane sends the manifests of deploy/control-plane that the
// suite cannot apply as they are to the API server as a dry-run create, with
// strict field validation: Crossplane's CRDs and webhooks in this API
// server check them, and nothing is stored. The suite runs
// provider-kubernetes and the function out of cluster, under its own
// names and packages, and has no registry holding the Configuration.
// (providerconfig.yaml it applies for real, in StartProvider.) The Function
// exists already under the name function.yaml gives it, so its create
// ends in AlreadyExists, which the API server answers only after
// validating the object (k8s.io/apiserver registry/generic/registry
// Store.Create runs BeforeCreate before the dry-run storage looks for an
// existing object).
func (c *Cluster) DryRunControlPlane(ctx context.Context) {
	for _, f := range []string{"runtime-config.yaml", "provider.yaml", "function.yaml", "configuration.yaml"} {
		rel := filepath.Join(controlPlaneDir, f)
		for _, u := range c.ReadYAMLFile(rel) {
			gvk := u.GroupVersionKind()
			m, err := c.rm.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				c.tb.Fatalf("cannot find the kind of %s %s in %s: %v", gvk.Kind, u.GetName(), rel, err)
			}
			_, err = c.Dyn.Resource(m.Resource).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{
				DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict,
			})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				c.tb.Fatalf("the API server refuses %s %s of %s: %v", gvk.Kind, u.GetName(), rel, err)
			}
		}
	}
}

// setGatewayNamespace sets gatewayNamespace to GatewayNS in the Input of
// every step of a Composition that calls this function, giving a step an
// Input if it has none. Only that field changes: everything else in the
// examples is installed as written. The ModelRoute Composition gets it too,
// because a ModelRoute's parentRefs name the Gateway in the namespace its
// own Input says (internal/gateway ParentRef).
func (c *Cluster) setGatewayNamespace(comp *unstructured.Unstructured) {
	if comp.GetKind() != "Composition" {
		return
	}
	steps, _, err := unstructured.NestedSlice(comp.Object, "spec", "pipeline")
	Must(c.tb, err)
	for i, x := range steps {
		step, _ := x.(map[string]any)
		if ref, _ := step["functionRef"].(map[string]any); ref["name"] != functionName {
			continue
		}
		in, _ := step["input"].(map[string]any)
		if in == nil {
			in = map[string]any{"apiVersion": "inferencegateway.fn.crossplane.io/v1beta1", "kind": "Input"}
		}
		in["gatewayNamespace"] = GatewayNS
		step["input"] = in
		steps[i] = step
	}
	Must(c.tb, unstructured.SetNestedSlice(comp.Object, steps, "spec", "pipeline"))
}
