package harness

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
	EnvoyGatewayNS     = "envoy-gateway-system" // where Envoy Gateway puts the Envoy Deployment (package/configuration/gateway/composition.yaml's Input)
	gatewayClassName   = "envoy"
	EGControllerName   = "gateway.envoyproxy.io/gatewayclass-controller"

	// ObjectNS holds the InferenceGateway's Objects on the control plane
	// (the Input's objectNamespace, as package/configuration/gateway/composition.yaml
	// sets it). A platform team creates it beforehand.
	ObjectNS = "modelplane-system"
	// GatewayNS is the Gateway's namespace on the gateway cluster (the
	// Input's gatewayNamespace). Here the control plane and the gateway
	// cluster are one API server, so the suite installs the Compositions
	// with a gatewayNamespace other than ObjectNS: then nobody but
	// provider-kubernetes, through the function's gateway-namespace Object,
	// can have created it.
	GatewayNS = "modelplane-gateway"
)

// Resources the test reads and writes.
var (
	gvrCRD           = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	GVRObject        = schema.GroupVersionResource{Group: "kubernetes.m.crossplane.io", Version: "v1alpha1", Resource: "objects"}
	GVRGateway       = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}
	gvrGatewayClass  = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"}
	GVREnvoyProxy    = schema.GroupVersionResource{Group: "gateway.envoyproxy.io", Version: "v1alpha1", Resource: "envoyproxies"}
	GVRBackend       = schema.GroupVersionResource{Group: "gateway.envoyproxy.io", Version: "v1alpha1", Resource: "backends"}
	GVREvent         = schema.GroupVersionResource{Version: "v1", Resource: "events"}
	GVRTrafficPolicy = schema.GroupVersionResource{Group: "gateway.envoyproxy.io", Version: "v1alpha1", Resource: "backendtrafficpolicies"}
	GVRClientPolicy  = schema.GroupVersionResource{Group: "gateway.envoyproxy.io", Version: "v1alpha1", Resource: "clienttrafficpolicies"}
	GVRHTTPRoute     = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}
	GVRAIRoute       = schema.GroupVersionResource{Group: "aigateway.envoyproxy.io", Version: "v1beta1", Resource: "aigatewayroutes"}
	GVRAIBackend     = schema.GroupVersionResource{Group: "aigateway.envoyproxy.io", Version: "v1beta1", Resource: "aiservicebackends"}
	GVRSecPolicy     = schema.GroupVersionResource{Group: "aigateway.envoyproxy.io", Version: "v1beta1", Resource: "backendsecuritypolicies"}
	gvrFunction      = schema.GroupVersionResource{Group: "pkg.crossplane.io", Version: "v1", Resource: "functions"}
	gvrFunctionRev   = schema.GroupVersionResource{Group: "pkg.crossplane.io", Version: "v1", Resource: "functionrevisions"}
	gvrXRD           = schema.GroupVersionResource{Group: "apiextensions.crossplane.io", Version: "v2", Resource: "compositeresourcedefinitions"}
	GVRInferenceGW   = schema.GroupVersionResource{Group: "modelplane.ai", Version: "v1alpha1", Resource: "inferencegateways"}
	GVRModelRoute    = schema.GroupVersionResource{Group: "modelplane.ai", Version: "v1alpha1", Resource: "modelroutes"}
	GVRDeployment    = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	GVRSecret        = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	GVRConfigMap     = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	GVRNamespace     = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// Cluster is the control plane on loopback: etcd, kube-apiserver and
// kube-controller-manager as the cluster, which is both the control plane
// and, through provider-kubernetes, the gateway cluster; Crossplane core;
// provider-kubernetes; a local OCI registry; and the function.
type Cluster struct {
	tb    testing.TB
	root  string // repository root
	Dir   string // this run's temporary folder
	Procs *Procs // the processes the cluster started
	ca    *ca

	Bins map[string]string // tool name -> binary
	// EnvoyCerts is the folder of the client certificate Envoy pods use,
	// with which the suite reads Envoy Gateway's xDS (the suite's xds_test.go).
	EnvoyCerts string

	xpMetrics   int // Crossplane's metrics port
	apiPort     int
	token       string
	Kubeconfig  string // file, for the processes
	auditLog    string // the API server's audit log: every request but watches, at Metadata
	GatewayUser string // who provider-kubernetes is on the gateway cluster

	// controllers is the Crossplane and provider-kubernetes bins holds,
	// whose module versions the CRDs come from.
	controllers Controllers

	// Provider is provider-kubernetes' process, and how it was started:
	// RestartProvider starts it again with or without watches.
	Provider        *Proc
	providerCerts   string
	providerWebhook int

	cfg  *rest.Config
	Dyn  dynamic.Interface // the dynamic client every read and write of the suite goes through
	disc discovery.CachedDiscoveryInterface
	rm   *restmapper.DeferredDiscoveryRESTMapper

	registry     string // host:port of the OCI registry
	FunctionPort int    // the port the function serves gRPC on
	functionPkg  string // the Function's spec.package
}

// BuildAll builds (or finds cached) every binary a control plane with the
// controllers pair runs; buildPrevious builds the function at the previous
// revision, which scenario 5b3 upgrades from.
func BuildAll(ctx context.Context, tb testing.TB, root string, pair Controllers, buildPrevious func(context.Context, testing.TB, string) string) map[string]string {
	bins := map[string]string{}
	start := time.Now()
	for _, t := range ToolsFor(pair) {
		bins[t.Name] = buildTool(ctx, tb, root, t)
	}
	xp, err := toolchain.Crossplane()
	if err != nil {
		tb.Fatalf("cannot build the crossplane CLI: %v", err)
	}
	bins["crossplane-cli"] = xp
	// Scenario 5b3 upgrades from it (the suite's rename_test.go).
	bins["function-previous"] = buildPrevious(ctx, tb, root)
	tb.Logf("binaries ready in %s", time.Since(start).Round(time.Second))
	return bins
}

// StartCluster brings up etcd, the API server and the controller manager,
// and returns once the API server serves and the controller manager has
// created the default ServiceAccount (without which no pod is admitted).
func StartCluster(ctx context.Context, tb testing.TB, root string, bins map[string]string, pair Controllers) *Cluster {
	dir := tb.TempDir()
	c := &Cluster{tb: tb, root: root, Dir: dir, Procs: newProcs(tb, dir), ca: newCA(tb), Bins: bins, token: "controlplane-test-admin", controllers: pair}

	// etcd on a temp data dir. --unsafe-no-fsync: the data is thrown away.
	etcdClient, etcdPeer := c.Procs.FreePort(), c.Procs.FreePort()
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeer)
	etcd := c.Procs.Start("etcd", nil, bins["etcd"],
		"--name=controlplane", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=controlplane="+peerURL, "--unsafe-no-fsync", "--log-level=warn")
	Must(tb, WaitFor(ctx, etcd, 100*time.Millisecond, "etcd health", func(ctx context.Context) (bool, error) {
		body, err := httpGet(ctx, http.DefaultClient, clientURL+"/health", "")
		return err == nil && strings.Contains(body, `"health":"true"`), err
	}))

	// kube-apiserver. --endpoint-reconciler-type=none: the default
	// reconciler refuses a loopback advertise address and loops on it.
	// Token auth with a system:masters token keeps every client simple; the
	// serving certificate comes from the test CA, so clients verify it.
	c.apiPort = c.Procs.FreePort()
	pki := filepath.Join(dir, "pki")
	Must(tb, os.MkdirAll(pki, 0o700))
	serving := c.ca.server(tb, "kube-apiserver", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
	c.ca.writeDir(tb, pki, serving)
	saKey, saPub := serviceAccountKeys(tb, pki)
	tokens := filepath.Join(pki, "tokens.csv")
	WriteFile(tb, tokens, []byte(c.token+`,admin,admin-uid,"system:masters"`+"\n"))
	// An audit log of every request but watches, at Metadata: it says who
	// created the gateway namespace, with which field manager, which the
	// namespace itself cannot (an apply of a bare name owns no field, so it
	// leaves no managedFields entry), and which client made each request,
	// by user agent, for the request rates (speed.go).
	auditPolicy := filepath.Join(pki, "audit-policy.yaml")
	WriteFile(tb, auditPolicy, []byte(`apiVersion: audit.k8s.io/v1
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
	api := c.Procs.Start("kube-apiserver", nil, bins["kube-apiserver"],
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
	Must(tb, err)
	Must(tb, WaitFor(ctx, api, 200*time.Millisecond, "kube-apiserver /readyz", func(ctx context.Context) (bool, error) {
		body, err := httpGet(ctx, httpc, apiURL+"/readyz", "")
		return err == nil && strings.TrimSpace(body) == "ok", err
	}))
	c.Dyn, err = dynamic.NewForConfig(c.cfg)
	Must(tb, err)
	dc, err := discovery.NewDiscoveryClientForConfig(c.cfg)
	Must(tb, err)
	c.disc = memory.NewMemCacheClient(dc)
	c.rm = restmapper.NewDeferredDiscoveryRESTMapper(c.disc)

	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	WriteFile(tb, c.Kubeconfig, c.kubeconfigFor(apiURL, "admin", c.token))

	// kube-controller-manager, with only the controllers this test needs:
	// deployment and replicaset roll the Envoy Deployment for real,
	// serviceaccount creates the default ServiceAccount that pod admission
	// wants, and garbagecollector removes composed resources once their
	// owner is gone.
	kcm := c.Procs.Start("kube-controller-manager", nil, bins["kube-controller-manager"],
		"--kubeconfig="+c.Kubeconfig,
		"--controllers=deployment,replicaset,serviceaccount,garbagecollector",
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(c.Procs.FreePort()))
	Must(tb, WaitFor(ctx, kcm, 200*time.Millisecond, "the default ServiceAccount", func(ctx context.Context) (bool, error) {
		_, err := c.Dyn.Resource(gvrServiceAccount).Namespace("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	}))
	return c
}

// kubeconfigFor returns a kubeconfig for a bearer token at server.
func (c *Cluster) kubeconfigFor(server, user, token string) []byte {
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

// ReadYAMLFile decodes the YAML documents of a file in the repository.
func (c *Cluster) ReadYAMLFile(rel string) []*unstructured.Unstructured {
	b, err := os.ReadFile(filepath.Join(c.root, rel))
	Must(c.tb, err)
	return decodeYAML(c.tb, rel, b)
}

// Create creates u, or leaves an existing object alone.
func (c *Cluster) Create(ctx context.Context, gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	c.tb.Helper()
	_, err := c.Dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		c.tb.Fatalf("cannot create %s %s/%s: %v", gvr.Resource, u.GetNamespace(), u.GetName(), err)
	}
}

// createTyped creates a typed object of a built-in kind.
func (c *Cluster) createTyped(ctx context.Context, gvr schema.GroupVersionResource, obj any, apiVersion, kind string) {
	c.tb.Helper()
	u, err := toUnstructured(obj, apiVersion, kind)
	Must(c.tb, err)
	c.Create(ctx, gvr, u)
}

// Apply creates each object by its kind, found through discovery.
func (c *Cluster) Apply(ctx context.Context, objs ...*unstructured.Unstructured) {
	c.tb.Helper()
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		var m *meta.RESTMapping
		err := WaitFor(ctx, nil, 200*time.Millisecond, "a REST mapping for "+gvk.String(), func(context.Context) (bool, error) {
			var err error
			if m, err = c.rm.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				// A kind that appeared since the last discovery, such as
				// an XR type Crossplane just created from an XRD.
				c.rm.Reset()
				return false, err
			}
			return true, nil
		})
		Must(c.tb, err)
		c.Create(ctx, m.Resource, u)
	}
}

// Namespace creates the namespace name on the control plane.
func (c *Cluster) Namespace(ctx context.Context, name string) {
	c.tb.Helper()
	c.Create(ctx, GVRNamespace, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name},
	}})
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

// Must fails the test when err is not nil.
func Must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
