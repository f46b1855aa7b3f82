package controlplane

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/retry"

	"github.com/modelplaneai/function-inference-gateway/test/internal/toolchain"
)

// Names the control plane is set up with. The XRs under example/ name the
// ClusterProviderConfig; the Composition names the Function, by the name
// crossplane xpkg install and a Configuration's dependency give it: its
// repository as a DNS label (the CLI, crossplane v2.2.0: internal/xpkg/
// name.go, ToDNSLabel, from cmd/crank/xpkg/install.go; the package manager,
// crossplane v2.3.0 internal/controller/pkg/resolver/reconciler.go,
// NewPackage, with crossplane-runtime v2.3.0 pkg/xpkg/name.go, ToDNSLabel,
// and v2.2.0 the same with its own internal/xpkg).
const (
	providerConfigName = "gpu-cluster-1"
	functionName       = "modelplaneai-function-inference-gateway"
	// functionRepository is the function package's repository in the
	// suite's registry, as on xpkg.crossplane.io.
	functionRepository = "modelplaneai/function-inference-gateway"
	// configurationDir holds the XRDs and Compositions the Configuration
	// package ships.
	configurationDir = "package/configuration"
	// controlPlaneDir holds what a platform team applies to the control
	// plane, and providerConfigFile the ClusterProviderConfig in it, for
	// the cluster the example XRs name.
	controlPlaneDir    = "deploy/control-plane"
	providerConfigFile = controlPlaneDir + "/providerconfig.yaml"
	crossplaneNS       = "crossplane-system"
	envoyGatewayNS     = "envoy-gateway-system" // where Envoy Gateway puts the Envoy Deployment (package/configuration/gateway/composition.yaml's Input)
	gatewayClassName   = "envoy"
	egControllerName   = "gateway.envoyproxy.io/gatewayclass-controller"

	// objectNS holds the InferenceGateway's Objects on the control plane
	// (the Input's objectNamespace, as package/configuration/gateway/composition.yaml
	// sets it). A platform team creates it beforehand.
	objectNS = "modelplane-system"
	// gatewayNS is the Gateway's namespace on the gateway cluster (the
	// Input's gatewayNamespace). Here the control plane and the gateway
	// cluster are one API server, so the suite installs the Compositions
	// with a gatewayNamespace other than objectNS: then nobody but
	// provider-kubernetes, through the function's gateway-namespace Object,
	// can have created it.
	gatewayNS = "modelplane-gateway"
)

// Resources the test reads and writes.
var (
	gvrCRD           = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	gvrObject        = schema.GroupVersionResource{Group: "kubernetes.m.crossplane.io", Version: "v1alpha1", Resource: "objects"}
	gvrGateway       = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}
	gvrGatewayClass  = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"}
	gvrEnvoyProxy    = schema.GroupVersionResource{Group: "gateway.envoyproxy.io", Version: "v1alpha1", Resource: "envoyproxies"}
	gvrBackend       = schema.GroupVersionResource{Group: "gateway.envoyproxy.io", Version: "v1alpha1", Resource: "backends"}
	gvrEvent         = schema.GroupVersionResource{Version: "v1", Resource: "events"}
	gvrTrafficPolicy = schema.GroupVersionResource{Group: "gateway.envoyproxy.io", Version: "v1alpha1", Resource: "backendtrafficpolicies"}
	gvrClientPolicy  = schema.GroupVersionResource{Group: "gateway.envoyproxy.io", Version: "v1alpha1", Resource: "clienttrafficpolicies"}
	gvrHTTPRoute     = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}
	gvrAIRoute       = schema.GroupVersionResource{Group: "aigateway.envoyproxy.io", Version: "v1beta1", Resource: "aigatewayroutes"}
	gvrAIBackend     = schema.GroupVersionResource{Group: "aigateway.envoyproxy.io", Version: "v1beta1", Resource: "aiservicebackends"}
	gvrSecPolicy     = schema.GroupVersionResource{Group: "aigateway.envoyproxy.io", Version: "v1beta1", Resource: "backendsecuritypolicies"}
	gvrFunction      = schema.GroupVersionResource{Group: "pkg.crossplane.io", Version: "v1", Resource: "functions"}
	gvrFunctionRev   = schema.GroupVersionResource{Group: "pkg.crossplane.io", Version: "v1", Resource: "functionrevisions"}
	gvrXRD           = schema.GroupVersionResource{Group: "apiextensions.crossplane.io", Version: "v2", Resource: "compositeresourcedefinitions"}
	gvrInferenceGW   = schema.GroupVersionResource{Group: "modelplane.ai", Version: "v1alpha1", Resource: "inferencegateways"}
	gvrModelRoute    = schema.GroupVersionResource{Group: "modelplane.ai", Version: "v1alpha1", Resource: "modelroutes"}
	gvrDeployment    = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	gvrSecret        = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	gvrConfigMap     = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	gvrNamespace     = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// cluster is the control plane on loopback: etcd, kube-apiserver and
// kube-controller-manager as the cluster, which is both the control plane
// and, through provider-kubernetes, the gateway cluster; Crossplane core;
// provider-kubernetes; a local OCI registry; and the function.
type cluster struct {
	tb   testing.TB
	root string // repository root
	dir  string // this run's temporary folder
	ps   *procs
	ca   *ca

	bins map[string]string // tool name -> binary
	// envoyCerts is the folder of the client certificate Envoy pods use,
	// with which the suite reads Envoy Gateway's xDS (xds_test.go).
	envoyCerts string

	xpMetrics   int // Crossplane's metrics port
	apiPort     int
	token       string
	kubeconfig  string // file, for the processes
	auditLog    string // the API server's audit log: every request but watches, at Metadata
	gatewayUser string // who provider-kubernetes is on the gateway cluster

	// controllers is the Crossplane and provider-kubernetes bins holds,
	// whose module versions the CRDs come from.
	controllers controllers

	// provider is provider-kubernetes' process, and how it was started:
	// restartProvider starts it again with or without watches.
	provider        *proc
	providerCerts   string
	providerWebhook int

	cfg  *rest.Config
	dyn  dynamic.Interface
	disc discovery.CachedDiscoveryInterface
	rm   *restmapper.DeferredDiscoveryRESTMapper

	registry     string // host:port of the OCI registry
	functionPort int
	functionPkg  string // the Function's spec.package
}

// buildAll builds (or finds cached) every binary a control plane with the
// controllers pair runs.
func buildAll(ctx context.Context, tb testing.TB, root string, pair controllers) map[string]string {
	bins := map[string]string{}
	start := time.Now()
	for _, t := range toolsFor(pair) {
		bins[t.name] = buildTool(ctx, tb, root, t)
	}
	xp, err := toolchain.Crossplane()
	if err != nil {
		tb.Fatalf("cannot build the crossplane CLI: %v", err)
	}
	bins["crossplane-cli"] = xp
	// Scenario 5b3 upgrades from it (rename_test.go).
	bins["function-previous"] = buildPreviousFunction(ctx, tb, root)
	tb.Logf("binaries ready in %s", time.Since(start).Round(time.Second))
	return bins
}

// startCluster brings up etcd, the API server and the controller manager,
// and returns once the API server serves and the controller manager has
// created the default ServiceAccount (without which no pod is admitted).
func startCluster(ctx context.Context, tb testing.TB, root string, bins map[string]string, pair controllers) *cluster {
	dir := tb.TempDir()
	c := &cluster{tb: tb, root: root, dir: dir, ps: newProcs(tb, dir), ca: newCA(tb), bins: bins, token: "controlplane-test-admin", controllers: pair}

	// etcd on a temp data dir. --unsafe-no-fsync: the data is thrown away.
	etcdClient, etcdPeer := c.ps.freePort(), c.ps.freePort()
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeer)
	etcd := c.ps.start("etcd", nil, bins["etcd"],
		"--name=controlplane", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=controlplane="+peerURL, "--unsafe-no-fsync", "--log-level=warn")
	must(tb, waitFor(ctx, etcd, 100*time.Millisecond, "etcd health", func(ctx context.Context) (bool, error) {
		body, err := httpGet(ctx, http.DefaultClient, clientURL+"/health", "")
		return err == nil && strings.Contains(body, `"health":"true"`), err
	}))

	// kube-apiserver. --endpoint-reconciler-type=none: the default
	// reconciler refuses a loopback advertise address and loops on it.
	// Token auth with a system:masters token keeps every client simple; the
	// serving certificate comes from the test CA, so clients verify it.
	c.apiPort = c.ps.freePort()
	pki := filepath.Join(dir, "pki")
	must(tb, os.MkdirAll(pki, 0o700))
	serving := c.ca.server(tb, "kube-apiserver", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
	c.ca.writeDir(tb, pki, serving)
	saKey, saPub := serviceAccountKeys(tb, pki)
	tokens := filepath.Join(pki, "tokens.csv")
	writeFile(tb, tokens, []byte(c.token+`,admin,admin-uid,"system:masters"`+"\n"))
	// An audit log of every request but watches, at Metadata: it says who
	// created the gateway namespace, with which field manager, which the
	// namespace itself cannot (an apply of a bare name owns no field, so it
	// leaves no managedFields entry), and which client made each request,
	// by user agent, for the request rates (speed_test.go).
	auditPolicy := filepath.Join(pki, "audit-policy.yaml")
	writeFile(tb, auditPolicy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
  verbs: [create, update, patch]
  resources:
  - group: ""
    resources: [namespaces]
- level: None
  verbs: [watch]
- level: Metadata
`))
	c.auditLog = filepath.Join(dir, "audit.log")
	api := c.ps.start("kube-apiserver", nil, bins["kube-apiserver"],
		"--etcd-servers="+clientURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(c.apiPort),
		"--cert-dir="+filepath.Join(dir, "apiserver-certs"),
		"--tls-cert-file="+filepath.Join(pki, "tls.crt"), "--tls-private-key-file="+filepath.Join(pki, "tls.key"),
		"--endpoint-reconciler-type=none",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--service-account-key-file="+saPub, "--service-account-signing-key-file="+saKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--token-auth-file="+tokens, "--authorization-mode=RBAC",
		"--audit-policy-file="+auditPolicy, "--audit-log-path="+c.auditLog,
		// One file, never rotated: the API server rotates it at 100 MB by
		// default (k8s.io/apiserver v0.36.1 pkg/server/options/audit.go,
		// NewAuditOptions and getWriter), which the 100-route test reaches
		// in ten minutes, and a window read from audit.log alone would
		// then miss the requests before the rotation.
		"--audit-log-maxsize=0",
		"--profiling=false")
	apiURL := fmt.Sprintf("https://127.0.0.1:%d", c.apiPort)
	c.cfg = &rest.Config{
		Host:            apiURL,
		BearerToken:     c.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.ca.certPEM},
		// The stand-ins and the observers poll and watch a lot; the
		// default client-side limit (5 QPS) would make them the bottleneck.
		QPS: 200, Burst: 400,
	}
	httpc, err := rest.HTTPClientFor(c.cfg)
	must(tb, err)
	must(tb, waitFor(ctx, api, 200*time.Millisecond, "kube-apiserver /readyz", func(ctx context.Context) (bool, error) {
		body, err := httpGet(ctx, httpc, apiURL+"/readyz", "")
		return err == nil && strings.TrimSpace(body) == "ok", err
	}))
	c.dyn, err = dynamic.NewForConfig(c.cfg)
	must(tb, err)
	dc, err := discovery.NewDiscoveryClientForConfig(c.cfg)
	must(tb, err)
	c.disc = memory.NewMemCacheClient(dc)
	c.rm = restmapper.NewDeferredDiscoveryRESTMapper(c.disc)

	c.kubeconfig = filepath.Join(dir, "kubeconfig")
	writeFile(tb, c.kubeconfig, c.kubeconfigFor(apiURL, "admin", c.token))

	// kube-controller-manager, with only the controllers this test needs:
	// deployment and replicaset roll the Envoy Deployment for real,
	// serviceaccount creates the default ServiceAccount that pod admission
	// wants, and garbagecollector removes composed resources once their
	// owner is gone.
	kcm := c.ps.start("kube-controller-manager", nil, bins["kube-controller-manager"],
		"--kubeconfig="+c.kubeconfig,
		"--controllers=deployment,replicaset,serviceaccount,garbagecollector",
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(c.ps.freePort()))
	must(tb, waitFor(ctx, kcm, 200*time.Millisecond, "the default ServiceAccount", func(ctx context.Context) (bool, error) {
		_, err := c.dyn.Resource(gvrServiceAccount).Namespace("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	}))
	return c
}

// kubeconfigFor returns a kubeconfig for a bearer token at server.
func (c *cluster) kubeconfigFor(server, user, token string) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: controlplane
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %[3]s
  user:
    token: %[4]s
contexts:
- name: controlplane
  context:
    cluster: controlplane
    user: %[3]s
current-context: controlplane
`, server, base64.StdEncoding.EncodeToString(c.ca.certPEM), user, token)
}

// crdSource is a folder of CRD YAML in a Go module.
type crdSource struct {
	module, version, dir string
	// skip reports whether a file is to be left out.
	skip func(name string) bool
	// env is what go mod download needs to fetch the module (tool.goEnv).
	env []string
}

// installCRDs installs every CustomResourceDefinition the composed
// resources need, straight from the upstream modules: provider-kubernetes,
// Envoy Gateway, Gateway API and Envoy AI Gateway. The API server then
// validates every composed manifest against the real schemas, CEL rules
// included.
func (c *cluster) installCRDs(ctx context.Context, providerWebhookPort int) {
	sources := []crdSource{
		{module: "github.com/crossplane-contrib/provider-kubernetes", version: c.controllers.provider.version, dir: "package/crds",
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
		// cert-manager's, for the gateway's client certificate (mtls_test.go).
		{module: "github.com/cert-manager/cert-manager", version: certManagerVersion, dir: "deploy/crds"},
	}
	var names []string
	for _, s := range sources {
		dir := filepath.Join(moduleDir(ctx, c.tb, s.module, s.version, s.env...), s.dir)
		for _, crd := range readCRDs(c.tb, dir, s.skip) {
			if crd.GetName() == "objects.kubernetes.crossplane.io" {
				c.pointConversionWebhook(crd, providerWebhookPort)
			}
			c.create(ctx, gvrCRD, crd)
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
func (c *cluster) pointConversionWebhook(crd *unstructured.Unstructured, port int) {
	cc := map[string]any{
		"url":      fmt.Sprintf("https://127.0.0.1:%d/convert", port),
		"caBundle": base64.StdEncoding.EncodeToString(c.ca.certPEM),
	}
	must(c.tb, unstructured.SetNestedMap(crd.Object, cc, "spec", "conversion", "webhook", "clientConfig"))
}

func (c *cluster) waitCRDEstablished(ctx context.Context, name string) {
	must(c.tb, waitFor(ctx, nil, 100*time.Millisecond, "CRD "+name+" Established", func(ctx context.Context) (bool, error) {
		u, err := c.dyn.Resource(gvrCRD).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return conditionStatus(u, "Established") == "True", nil
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

// decodeYAML decodes a stream of YAML documents, skipping empty ones.
func decodeYAML(tb testing.TB, name string, b []byte) []*unstructured.Unstructured {
	tb.Helper()
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		err := d.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			tb.Fatalf("cannot decode YAML in %s: %v", name, err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// readYAMLFile decodes the YAML documents of a file in the repository.
func (c *cluster) readYAMLFile(rel string) []*unstructured.Unstructured {
	b, err := os.ReadFile(filepath.Join(c.root, rel))
	must(c.tb, err)
	return decodeYAML(c.tb, rel, b)
}

// create creates u, or leaves an existing object alone.
func (c *cluster) create(ctx context.Context, gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	c.tb.Helper()
	_, err := c.dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		c.tb.Fatalf("cannot create %s %s/%s: %v", gvr.Resource, u.GetNamespace(), u.GetName(), err)
	}
}

// createTyped creates a typed object of a built-in kind.
func (c *cluster) createTyped(ctx context.Context, gvr schema.GroupVersionResource, obj any, apiVersion, kind string) {
	c.tb.Helper()
	u, err := toUnstructured(obj, apiVersion, kind)
	must(c.tb, err)
	c.create(ctx, gvr, u)
}

// apply creates each object by its kind, found through discovery.
func (c *cluster) apply(ctx context.Context, objs ...*unstructured.Unstructured) {
	c.tb.Helper()
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		var m *meta.RESTMapping
		err := waitFor(ctx, nil, 200*time.Millisecond, "a REST mapping for "+gvk.String(), func(context.Context) (bool, error) {
			var err error
			if m, err = c.rm.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				// A kind that appeared since the last discovery, such as
				// an XR type Crossplane just created from an XRD.
				c.rm.Reset()
				return false, err
			}
			return true, nil
		})
		must(c.tb, err)
		c.create(ctx, m.Resource, u)
	}
}

func (c *cluster) namespace(ctx context.Context, name string) {
	c.tb.Helper()
	c.create(ctx, gvrNamespace, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name},
	}})
}

// startCrossplane runs `crossplane core init`, which installs Crossplane's
// CRDs and its Lock, then `crossplane core start` with the External package
// runtime: Crossplane fetches and installs packages but runs no Deployment
// for them, and this test plays the runtime for the function.
func (c *cluster) startCrossplane(ctx context.Context) {
	xpDir := moduleDir(ctx, c.tb, "github.com/crossplane/crossplane/v2", c.controllers.crossplane.version, c.controllers.crossplane.goEnv()...)
	c.namespace(ctx, crossplaneNS)
	env := []string{"KUBECONFIG=" + c.kubeconfig} // Crossplane has no --kubeconfig flag
	// On a fresh API server the first init can fail with `no matches for
	// kind "Lock"`: it creates the Lock before discovery has caught up with
	// the CRD it just created. Retrying shortly after succeeds.
	var out, lastErr string
	must(c.tb, waitFor(ctx, nil, time.Second, "crossplane core init", func(ctx context.Context) (bool, error) {
		var err error
		defer func() {
			if err != nil && err.Error() != lastErr {
				lastErr = err.Error()
				c.tb.Logf("crossplane core init failed (retrying): %v", err)
			}
		}()
		out, err = c.ps.run(ctx, env, c.bins["crossplane"], "core", "init",
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
	certs := c.ca.writeDir(c.tb, filepath.Join(c.dir, "crossplane-client-certs"), c.ca.client(c.tb, "crossplane"))
	// Crossplane writes fetched packages into the cache folder but does not
	// create it; without it every unpack fails with "io: read/write on
	// closed pipe" (the cache writer's end of a pipe).
	cache := filepath.Join(c.dir, "xpkg-cache")
	must(c.tb, os.MkdirAll(cache, 0o755))
	metrics, probe := c.ps.freePort(), c.ps.freePort()
	c.xpMetrics = metrics
	xp := c.ps.start("crossplane", env, c.bins["crossplane"], "core", "start",
		"--enable-webhooks=false", "--package-runtime=External",
		"--tls-client-certs-dir="+certs,
		"--xpkg-cache-dir="+cache,
		"--metrics-port="+strconv.Itoa(metrics), "--health-probe-port="+strconv.Itoa(probe))
	must(c.tb, waitFor(ctx, xp, 200*time.Millisecond, "Crossplane /readyz", func(ctx context.Context) (bool, error) {
		_, err := httpGet(ctx, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/readyz", probe), "")
		return err == nil, err
	}))
}

// startProvider runs provider-kubernetes against the cluster, with watches
// on so that an Object's spec.watch takes effect (v1.3 defaults the feature
// off, v1.4 on) and with --sanitize-secrets, so that a remote Secret's data never
// lands in an Object's status.atProvider.manifest (object.go,
// setAtProvider). Its own client, for Objects and their references on the
// control plane, stays admin: that is Crossplane's side. Its
// ClusterProviderConfig, deploy/control-plane/providerconfig.yaml as it is,
// points back at the same API server, which plays the gateway cluster,
// with the least-privilege identity of deploy/gateway-cluster-rbac.yaml.
func (c *cluster) startProvider(ctx context.Context, webhookPort int) {
	c.providerCerts = c.ca.writeDir(c.tb, filepath.Join(c.dir, "provider-certs"), c.ca.server(c.tb, "provider-kubernetes"))
	c.providerWebhook = webhookPort
	c.runProvider(ctx, true)

	user, token := c.gatewayIdentity(ctx)
	c.gatewayUser = user
	// deploy/control-plane/providerconfig.yaml, applied as it is: the
	// Secret it names gets a kubeconfig for the gateway identity.
	cpcs := c.readYAMLFile(providerConfigFile)
	if len(cpcs) != 1 || cpcs[0].GetName() != providerConfigName {
		c.tb.Fatalf("cannot use %s: want one ClusterProviderConfig named %s, the name the example XRs use", providerConfigFile, providerConfigName)
	}
	ref, _, err := unstructured.NestedStringMap(cpcs[0].Object, "spec", "credentials", "secretRef")
	must(c.tb, err)
	if ref["name"] == "" || ref["namespace"] == "" || ref["key"] == "" {
		c.tb.Fatalf("cannot use %s: its spec.credentials.secretRef must name a Secret's namespace, name and key, got %v", providerConfigFile, ref)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: ref["name"], Namespace: ref["namespace"]},
		Data:       map[string][]byte{ref["key"]: c.kubeconfigFor(fmt.Sprintf("https://127.0.0.1:%d", c.apiPort), user, token)},
	}
	c.createTyped(ctx, gvrSecret, secret, "v1", "Secret")
	c.apply(ctx, cpcs...)
}

// runProvider starts provider-kubernetes' process with watches on or off,
// always said explicitly: the default is off up to v1.3.1 and on from v1.4
// (v1.4.1 cmd/provider/main.go, enable-watches). Off is --no-enable-watches:
// the flag parser (kingpin v2.4.0 parser.go, Next, and flags.go, parse)
// takes --enable-watches=false as --enable-watches followed by a stray
// argument "false", and refuses it. It waits until the provider is ready.
func (c *cluster) runProvider(ctx context.Context, watches bool) {
	c.tb.Helper()
	probe := c.ps.freePort()
	args := []string{
		"--sanitize-secrets",
		"--webhook-port=" + strconv.Itoa(c.providerWebhook),
		"--metrics-bind-address=" + fmt.Sprintf("127.0.0.1:%d", c.ps.freePort()),
		"--health-probe-bind-addr=" + fmt.Sprintf("127.0.0.1:%d", probe),
	}
	if watches {
		args = append(args, "--enable-watches")
	} else {
		args = append(args, "--no-enable-watches")
	}
	c.provider = c.ps.start("provider-kubernetes",
		[]string{"KUBECONFIG=" + c.kubeconfig, "TLS_SERVER_CERTS_DIR=" + c.providerCerts},
		c.bins["provider-kubernetes"], args...)
	must(c.tb, waitFor(ctx, c.provider, 200*time.Millisecond, "provider-kubernetes /readyz", func(ctx context.Context) (bool, error) {
		_, err := httpGet(ctx, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/readyz", probe), "")
		return err == nil, err
	}))
}

// restartProvider stops provider-kubernetes and starts it again, with
// watches or without them, as a platform team that changes its
// DeploymentRuntimeConfig would.
func (c *cluster) restartProvider(ctx context.Context, watches bool) {
	c.tb.Helper()
	c.provider.stop(10 * time.Second)
	c.runProvider(ctx, watches)
}

// installFunction builds this function and its package, serves the
// function over mTLS, pushes the package to a local registry, and installs
// it as a Function. Crossplane's External runtime never sets the revision's
// endpoint, so the test does what a runtime controller would: it points the
// FunctionRevision at the function and reports the runtime healthy.
func (c *cluster) installFunction(ctx context.Context) {
	// The function, over mTLS with a server certificate for 127.0.0.1.
	bin, err := toolchain.Function(c.dir, functionFlags(c.tb, c.root, c.dir)...)
	must(c.tb, err)
	certs := c.ca.writeDir(c.tb, filepath.Join(c.dir, "function-certs"), c.ca.server(c.tb, functionName))
	c.functionPort = c.ps.freePort()
	fn := c.ps.start("function", nil, bin,
		"--tls-certs-dir="+certs, fmt.Sprintf("--address=127.0.0.1:%d", c.functionPort), "--debug")
	must(c.tb, waitFor(ctx, fn, 100*time.Millisecond, "the function's gRPC port", listening(c.functionPort)))

	// The registry: crane's in-memory OCI registry, plain HTTP on loopback.
	// go-containerregistry, which both crane and Crossplane use, talks
	// plain HTTP to a 127.0.0.1 registry without further configuration.
	regPort := c.ps.freePort()
	c.registry = fmt.Sprintf("127.0.0.1:%d", regPort)
	reg := c.ps.start("registry", nil, c.bins["crane"], "registry", "serve", "--address="+c.registry)
	must(c.tb, waitFor(ctx, reg, 100*time.Millisecond, "the registry", listening(regPort)))

	// The package: the repository's package/crossplane.yaml (and the
	// Input CRD beside it) when it is there, a minimal meta otherwise. It
	// carries no runtime image: nothing runs one here.
	pkgRoot := filepath.Join(c.dir, "package")
	must(c.tb, os.MkdirAll(pkgRoot, 0o755))
	if b, err := os.ReadFile(filepath.Join(c.root, "package", "crossplane.yaml")); err == nil {
		writeFile(c.tb, filepath.Join(pkgRoot, "crossplane.yaml"), b)
	} else {
		writeFile(c.tb, filepath.Join(pkgRoot, "crossplane.yaml"), []byte(`apiVersion: meta.pkg.crossplane.io/v1
kind: Function
metadata:
  name: `+functionName+`
spec:
  capabilities: [composition]
`))
	}
	xpkg := filepath.Join(c.dir, "function.xpkg")
	out, err := c.ps.run(ctx, nil, c.bins["crossplane-cli"], "xpkg", "build",
		"--package-root="+pkgRoot, "--examples-root="+filepath.Join(c.dir, "no-examples"), "--package-file="+xpkg)
	if err != nil {
		c.tb.Fatalf("cannot build the function package: %v\n%s", err, out)
	}
	c.functionPkg = c.registry + "/" + functionRepository + ":v0.1.0"
	if out, err := c.ps.run(ctx, nil, c.bins["crane"], "push", "--insecure", xpkg, c.functionPkg); err != nil {
		c.tb.Fatalf("cannot push the function package: %v\n%s", err, out)
	}

	// The Secret a runtime would hold the function's server certificate
	// in; the revision's status names it.
	tlsSecret := functionName + "-tls-server"
	kp, err := os.ReadFile(filepath.Join(certs, "tls.crt"))
	must(c.tb, err)
	c.createTyped(ctx, gvrSecret, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: tlsSecret, Namespace: crossplaneNS},
		Data:       map[string][]byte{"tls.crt": kp, "ca.crt": c.ca.certPEM},
	}, "v1", "Secret")

	c.create(ctx, gvrFunction, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pkg.crossplane.io/v1",
		"kind":       "Function",
		"metadata":   map[string]any{"name": functionName},
		"spec":       map[string]any{"package": c.functionPkg},
	}})

	// Play the runtime: once the package manager has made the active
	// revision, give it the endpoint and a RuntimeHealthy condition, the
	// two things Crossplane's Deployment runtime would have set.
	var rev string
	must(c.tb, waitFor(ctx, nil, 200*time.Millisecond, "an active FunctionRevision", func(ctx context.Context) (bool, error) {
		l, err := c.dyn.Resource(gvrFunctionRev).List(ctx, metav1.ListOptions{LabelSelector: "pkg.crossplane.io/package=" + functionName})
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
	must(c.tb, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r, err := c.dyn.Resource(gvrFunctionRev).Get(ctx, rev, metav1.GetOptions{})
		if err != nil {
			return err
		}
		must(c.tb, unstructured.SetNestedField(r.Object, fmt.Sprintf("dns:///127.0.0.1:%d", c.functionPort), "status", "endpoint"))
		must(c.tb, unstructured.SetNestedField(r.Object, tlsSecret, "status", "tlsServerSecretName"))
		setCondition(r, map[string]any{
			"type": "RuntimeHealthy", "status": "True", "reason": "HealthyPackageRevision",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
		})
		_, err = c.dyn.Resource(gvrFunctionRev).UpdateStatus(ctx, r, metav1.UpdateOptions{})
		return err
	}))
	must(c.tb, waitFor(ctx, fn, 200*time.Millisecond, "Function Installed and Healthy", func(ctx context.Context) (bool, error) {
		f, err := c.dyn.Resource(gvrFunction).Get(ctx, functionName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if conditionStatus(f, "Installed") == "True" && conditionStatus(f, "Healthy") == "True" {
			return true, nil
		}
		return false, fmt.Errorf("cannot see the Function installed and healthy yet: %s", conditionsSummary(f))
	}))
}

// installExamples installs the XRDs and Compositions the Configuration
// package ships, package/configuration/<kind>/, as they are but for the
// Input's gatewayNamespace, and waits until Crossplane serves both XR kinds.
func (c *cluster) installExamples(ctx context.Context) {
	for _, kind := range []string{"gateway", "route"} {
		c.apply(ctx, c.readYAMLFile(filepath.Join(configurationDir, kind, "xrd.yaml"))...)
	}
	for _, name := range []string{"inferencegateways.modelplane.ai", "modelroutes.modelplane.ai"} {
		must(c.tb, waitFor(ctx, nil, 200*time.Millisecond, "XRD "+name+" Established", func(ctx context.Context) (bool, error) {
			u, err := c.dyn.Resource(gvrXRD).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return conditionStatus(u, "Established") == "True", nil
		}))
	}
	for _, kind := range []string{"gateway", "route"} {
		comps := c.readYAMLFile(filepath.Join(configurationDir, kind, "composition.yaml"))
		for _, u := range comps {
			c.setGatewayNamespace(u)
		}
		c.apply(ctx, comps...)
	}
}

// dryRunControlPlane sends the manifests of deploy/control-plane that the
// suite cannot apply as they are to the API server as a dry-run create, with
// strict field validation: Crossplane's CRDs and webhooks in this API
// server check them, and nothing is stored. The suite runs
// provider-kubernetes and the function out of cluster, under its own
// names and packages, and has no registry holding the Configuration.
// (providerconfig.yaml it applies for real, in startProvider.) The Function
// exists already under the name function.yaml gives it, so its create
// ends in AlreadyExists, which the API server answers only after
// validating the object (k8s.io/apiserver registry/generic/registry
// Store.Create runs BeforeCreate before the dry-run storage looks for an
// existing object).
func (c *cluster) dryRunControlPlane(ctx context.Context) {
	for _, f := range []string{"runtime-config.yaml", "provider.yaml", "function.yaml", "configuration.yaml"} {
		rel := filepath.Join(controlPlaneDir, f)
		for _, u := range c.readYAMLFile(rel) {
			gvk := u.GroupVersionKind()
			m, err := c.rm.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				c.tb.Fatalf("cannot find the kind of %s %s in %s: %v", gvk.Kind, u.GetName(), rel, err)
			}
			_, err = c.dyn.Resource(m.Resource).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{
				DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict,
			})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				c.tb.Fatalf("the API server refuses %s %s of %s: %v", gvk.Kind, u.GetName(), rel, err)
			}
		}
	}
}

// setGatewayNamespace sets gatewayNamespace to gatewayNS in the Input of
// every step of a Composition that calls this function, giving a step an
// Input if it has none. Only that field changes: everything else in the
// examples is installed as written. The ModelRoute Composition gets it too,
// because a ModelRoute's parentRefs name the Gateway in the namespace its
// own Input says (internal/gateway ParentRef).
func (c *cluster) setGatewayNamespace(comp *unstructured.Unstructured) {
	if comp.GetKind() != "Composition" {
		return
	}
	steps, _, err := unstructured.NestedSlice(comp.Object, "spec", "pipeline")
	must(c.tb, err)
	for i, x := range steps {
		step, _ := x.(map[string]any)
		if ref, _ := step["functionRef"].(map[string]any); ref["name"] != functionName {
			continue
		}
		in, _ := step["input"].(map[string]any)
		if in == nil {
			in = map[string]any{"apiVersion": "inferencegateway.fn.crossplane.io/v1beta1", "kind": "Input"}
		}
		in["gatewayNamespace"] = gatewayNS
		step["input"] = in
		steps[i] = step
	}
	must(c.tb, unstructured.SetNestedSlice(comp.Object, steps, "spec", "pipeline"))
}

func httpGet(ctx context.Context, hc *http.Client, url, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rsp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = rsp.Body.Close() }()
	b, err := io.ReadAll(rsp.Body)
	if err != nil {
		return "", err
	}
	if rsp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("cannot GET %s: %s: %s", url, rsp.Status, b)
	}
	return string(b), nil
}

// headAndTail keeps the start and the end of a command's output for an error
// message: a CLI prints its error first and may follow it with its usage.
func headAndTail(s string) string {
	const n = 1000
	if len(s) > 2*n {
		return s[:n] + "\n...\n" + s[len(s)-n:]
	}
	return s
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
