package harness

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
)

// The real Envoy Gateway and Envoy AI Gateway controllers, built from their
// Go modules and run out of cluster against the loopback API server, each
// in a namespace of its own (isolate.go). They are installed the way
// their guides install them in a cluster; what differs is said where it is
// done.

var gvrMutatingWebhook = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}

const (
	// aiGatewayNS is where AI Gateway's install puts its controller; the
	// controller patches the pod webhook named after it (ai-gateway v1.0.0
	// cmd/controller/main.go, POD_NAMESPACE).
	aiGatewayNS = "envoy-ai-gateway-system"

	// aiGatewayWebhook is the MutatingWebhookConfiguration of AI Gateway's
	// chart (manifests/charts/ai-gateway-helm/templates/admission_webhook.yaml).
	aiGatewayWebhook = "envoy-ai-gateway-gateway-pod-mutator." + aiGatewayNS

	// ExtProcImage is the sidecar image the AI Gateway controller injects,
	// pinned to its own version (the flag's default is :latest).
	ExtProcImage = "docker.io/envoyproxy/ai-gateway-extproc:v1.0.0"

	// sidecarName is the ext-proc sidecar's container name; on Kubernetes
	// 1.33 and later it is a native sidecar, an init container with
	// restartPolicy Always (ai-gateway v1.0.0 internal/controller/
	// gateway_mutator.go, extProcContainerName and isKubernetes133OrLater).
	sidecarName = "ai-gateway-extproc"

	// lbAddress is what the load-balancer stand-in gives every
	// LoadBalancer Service: TEST-NET-1, an address nothing answers.
	lbAddress = "192.0.2.10"
)

// egConfig is Envoy Gateway's configuration: the Kubernetes provider as its
// Helm chart sets it, with leader election off (one replica, out of
// cluster) and the topology injector off (a webhook for pods' zone labels
// that needs an in-cluster Service; certgen's --disable-topology-injector
// matches), and the extension manager that AI Gateway's install adds
// (ai-gateway v1.0.0 manifests/envoy-gateway-values.yaml), pointed at the
// extension server by IP instead of its Service's FQDN.
const egConfig = `apiVersion: gateway.envoyproxy.io/v1alpha1
kind: EnvoyGateway
gateway:
  controllerName: gateway.envoyproxy.io/gatewayclass-controller
logging:
  level:
    default: info
provider:
  type: Kubernetes
  kubernetes:
    leaderElection:
      disable: true
    proxyTopologyInjector:
      disabled: true
admin:
  address:
    host: 127.0.0.1
    port: 19000
extensionApis:
  enableEnvoyPatchPolicy: true
  enableBackend: true
extensionManager:
  hooks:
    xdsTranslator:
      translation:
        listener:
          includeAll: true
        route:
          includeAll: true
        cluster:
          includeAll: true
        secret:
          includeAll: true
      post:
      - Translation
      - Cluster
      - Route
  service:
    ip:
      address: 127.0.0.1
      port: %d
`

// Upstream is the two real controllers, running.
type Upstream struct {
	eg, AIGW      *Proc // Envoy Gateway's process; AI Gateway's
	extensionPort int
	webhookPort   int
	AIGWImage     string // the ext-proc image the running AI Gateway injects
	aigwCerts     string
	egCerts       string // Envoy Gateway's /certs, from its certgen
	egConfig      string // Envoy Gateway's configuration file
	// Google is the stand-in of Google's token endpoint, which AI
	// Gateway's controller may dial (tokens.go).
	Google *GoogleTokens
	// Entra is the stand-in of Microsoft Entra ID, the proxy AI
	// Gateway's controller reaches Azure through (entra.go).
	Entra *MicrosoftEntra
}

// startUpstream installs and starts AI Gateway, then Envoy Gateway, and
// returns once Envoy Gateway has accepted the GatewayClass and AI Gateway's
// webhook answers.
func (c *Cluster) startUpstream(ctx context.Context) *Upstream {
	c.tb.Helper()
	u := &Upstream{extensionPort: c.Procs.FreePort(), webhookPort: c.Procs.FreePort()}
	u.Google = startGoogleTokens(c.tb, c.Procs.FreePort())
	u.Entra = c.startMicrosoftEntra(c.tb, c.Procs.FreePort())
	c.Namespace(ctx, aiGatewayNS)
	u.aigwCerts = c.ca.writeDir(c.tb, filepath.Join(c.Dir, "ai-gateway-certs"), c.ca.server(c.tb, "ai-gateway-controller"))
	c.installPodWebhook(ctx, u.webhookPort)
	c.StartAIGateway(ctx, u, ExtProcImage)
	c.startEnvoyGateway(ctx, u)
	return u
}

// installPodWebhook registers AI Gateway's pod webhook as its chart does,
// at a loopback URL instead of the controller's Service.
func (c *Cluster) installPodWebhook(ctx context.Context, port int) {
	c.Create(ctx, gvrMutatingWebhook, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1",
		"kind":       "MutatingWebhookConfiguration",
		"metadata":   map[string]any{"name": aiGatewayWebhook},
		"webhooks": []any{map[string]any{
			"name": "ai-gateway-controller." + aiGatewayNS + ".svc.cluster.local",
			"clientConfig": map[string]any{
				"url":      fmt.Sprintf("https://127.0.0.1:%d/mutate", port),
				"caBundle": base64.StdEncoding.EncodeToString(c.ca.certPEM),
			},
			"rules": []any{map[string]any{
				"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"pods"},
			}},
			"objectSelector":          map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/managed-by": "envoy-gateway"}},
			"sideEffects":             "None",
			"admissionReviewVersions": []any{"v1"},
			"timeoutSeconds":          int64(10),
			"failurePolicy":           "Fail",
		}},
	}})
}

// StartAIGateway starts the AI Gateway controller with the given ext-proc
// image and waits for its webhook to serve TLS. Its flags: no leader
// election (otherwise it asks for a namespace to elect in, being out of
// cluster), its own certificates (it rewrites the webhook's caBundle from
// ca.crt at start), the extension server on the loopback, and the request
// headers its extension server copies into dynamic metadata for the access
// log, as the README's install steps set them.
func (c *Cluster) StartAIGateway(ctx context.Context, u *Upstream, image string) {
	c.tb.Helper()
	u.AIGWImage = image
	u.AIGW = c.Procs.startIsolated("ai-gateway", []string{
		"KUBECONFIG=" + c.Kubeconfig, "POD_NAMESPACE=" + aiGatewayNS, "DISABLE_PPROF=true",
		// Azure's token requests go through the Entra stand-in, whose
		// certificate the test CA signs.
		"AI_GATEWAY_AZURE_PROXY_URL=" + u.Entra.ProxyURL(), "SSL_CERT_FILE=" + u.Entra.caFile,
	}, isolation{Outbound: []int{c.apiPort, u.Google.port, u.Entra.proxyPort}, Inbound: []int{u.webhookPort, u.extensionPort}},
		c.Bins[toolAIGateway.Name],
		"-enableLeaderElection=false",
		"-envoyGatewayNamespace="+EnvoyGatewayNS,
		"-extProcImage="+image,
		"-tlsCertDir="+u.aigwCerts,
		"-webhookPort="+strconv.Itoa(u.webhookPort),
		"-port=127.0.0.1:"+strconv.Itoa(u.extensionPort),
		"-logRequestHeaderAttributes="+gateway.LogRequestHeaderAttributes,
	)
	Must(c.tb, WaitFor(ctx, u.AIGW, 250*time.Millisecond, "AI Gateway's pod webhook", tlsServes(u.webhookPort)))
}

// RestartAIGateway stops AI Gateway and starts it again with another
// ext-proc image, as an upgrade of AI Gateway would.
func (c *Cluster) RestartAIGateway(ctx context.Context, u *Upstream, image string) {
	c.tb.Helper()
	u.AIGW.Stop(10 * time.Second)
	c.StartAIGateway(ctx, u, image)
}

// startEnvoyGateway makes Envoy Gateway's certificates with its own
// certgen, writes its configuration and starts it, and waits for it to
// accept the GatewayClass.
func (c *Cluster) startEnvoyGateway(ctx context.Context, u *Upstream) {
	c.tb.Helper()
	bin := c.Bins[toolEnvoyGateway.Name]
	env := []string{"KUBECONFIG=" + c.Kubeconfig}
	// certgen creates the Secrets envoy-gateway, envoy, envoy-rate-limit
	// and envoy-oidc-hmac in envoy-gateway-system (gateway v1.8.3
	// internal/cmd/certgen.go); without --disable-topology-injector it
	// then looks for the injector's webhook and exits 1.
	if out, err := c.Procs.run(ctx, env, bin, "certgen", "--disable-topology-injector"); err != nil {
		c.tb.Fatalf("cannot run Envoy Gateway's certgen: %v\n%s", err, out)
	}
	certs := c.WriteCertgenSecret(ctx, "envoy-gateway", filepath.Join(c.Dir, "envoy-gateway-certs"))
	// The mount point must exist on the host; a mount namespace shares the
	// host's tree. Remove it afterwards if this test made it.
	if _, err := os.Stat("/certs"); os.IsNotExist(err) {
		Must(c.tb, os.Mkdir("/certs", 0o755))
		c.tb.Cleanup(func() { _ = os.Remove("/certs") })
	}
	u.egCerts = certs
	c.EnvoyCerts = c.writeEnvoyCerts(ctx)
	u.egConfig = filepath.Join(c.Dir, "envoy-gateway.yaml")
	c.writeEGConfig(u, "")
	c.LaunchEnvoyGateway(u)
	c.Create(ctx, gvrGatewayClass, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1",
		"kind":       "GatewayClass",
		"metadata":   map[string]any{"name": gatewayClassName},
		"spec":       map[string]any{"controllerName": EGControllerName},
	}})
	Must(c.tb, WaitFor(ctx, u.eg, 250*time.Millisecond, "Envoy Gateway to accept the GatewayClass", func(ctx context.Context) (bool, error) {
		gc, err := c.Dyn.Resource(gvrGatewayClass).Get(ctx, gatewayClassName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return ConditionStatus(gc, "Accepted") == "True", nil
	}))
}

// WriteCertgenSecret writes the ca.crt, tls.crt and tls.key of one of
// certgen's Secrets in envoy-gateway-system into dir, and returns dir.
func (c *Cluster) WriteCertgenSecret(ctx context.Context, name, dir string) string {
	s, err := c.Dyn.Resource(GVRSecret).Namespace(EnvoyGatewayNS).Get(ctx, name, metav1.GetOptions{})
	Must(c.tb, err)
	Must(c.tb, os.MkdirAll(dir, 0o700))
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		v, _, _ := unstructured.NestedString(s.Object, "data", k)
		b, err := base64.StdEncoding.DecodeString(v)
		Must(c.tb, err)
		WriteFile(c.tb, filepath.Join(dir, k), b)
	}
	return dir
}

// writeEGConfig writes Envoy Gateway's configuration: egConfig, and, with
// a redisURL, global rate limiting with that Redis as its Helm values set
// it (config.rateLimit.backend; gateway v1.8.3
// api/v1alpha1/envoygateway_types.go, RateLimit).
func (c *Cluster) writeEGConfig(u *Upstream, redisURL string) {
	c.tb.Helper()
	cfg := fmt.Sprintf(egConfig, u.extensionPort)
	if redisURL != "" {
		cfg += fmt.Sprintf("rateLimit:\n  backend:\n    type: Redis\n    redis:\n      url: %s\n", redisURL)
	}
	WriteFile(c.tb, u.egConfig, []byte(cfg))
}

// RestartEnvoyGatewayWithRateLimit restarts Envoy Gateway with global rate
// limiting on, backed by the Redis at redisURL: what a platform that sets
// token budgets installs (docs/install.md). It returns once the rate-limit
// xDS server answers, and fails at once if Envoy Gateway exits instead
// (it validates its configuration at start: gateway v1.8.3
// api/v1alpha1/validation/envoygateway_validate.go).
func (c *Cluster) RestartEnvoyGatewayWithRateLimit(ctx context.Context, u *Upstream, redisURL string) {
	c.tb.Helper()
	c.writeEGConfig(u, redisURL)
	c.RestartEnvoyGateway(u)
	Must(c.tb, WaitFor(ctx, u.eg, 250*time.Millisecond, "Envoy Gateway's rate-limit xDS server", tlsServes(RateLimitXDSPort)))
}

// LaunchEnvoyGateway starts Envoy Gateway's server in its namespaces. Its
// rate-limit xDS server (18001) is reachable from the host like its xDS
// server; it listens only with rate limiting on.
func (c *Cluster) LaunchEnvoyGateway(u *Upstream) {
	c.tb.Helper()
	u.eg = c.Procs.startIsolated("envoy-gateway", []string{"KUBECONFIG=" + c.Kubeconfig},
		isolation{Outbound: []int{c.apiPort, u.extensionPort}, Inbound: []int{XDSPort, RateLimitXDSPort}, Mounts: map[string]string{"/certs": u.egCerts}},
		c.Bins[toolEnvoyGateway.Name], "server", "--config-path", u.egConfig)
}

// RestartEnvoyGateway stops Envoy Gateway and starts it again, as an
// upgrade or a rescheduled pod would.
func (c *Cluster) RestartEnvoyGateway(u *Upstream) {
	c.tb.Helper()
	u.eg.Stop(10 * time.Second)
	c.LaunchEnvoyGateway(u)
}

// tlsServes reports whether a TLS server answers a handshake on port.
func tlsServes(port int) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: time.Second}, Config: &tls.Config{InsecureSkipVerify: true}} // only checks that it serves
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return false, err
		}
		_ = conn.Close()
		return true, nil
	}
}

// loadBalancer stands in for a cloud's load-balancer controller: every
// LoadBalancer Service in Envoy Gateway's namespace gets an ingress
// address. Envoy Gateway sets a LoadBalancer Service's Gateway's
// status.addresses from it, and without an address the Gateway is not
// Programmed (gateway v1.8.3 internal/gatewayapi/status/gateway.go,
// UpdateGatewayStatusProgrammedCondition and
// updateGatewayProgrammedCondition, AddressNotAssigned).
type loadBalancer struct {
	c    *Cluster
	kick kicker
}

func (lb *loadBalancer) reconcile(ctx context.Context) error {
	l, err := lb.c.Dyn.Resource(gvrService).Namespace(EnvoyGatewayNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("cannot list Services: %w", err)
	}
	for i := range l.Items {
		s := &l.Items[i]
		if t, _, _ := unstructured.NestedString(s.Object, "spec", "type"); t != "LoadBalancer" {
			continue
		}
		if ing, _, _ := unstructured.NestedSlice(s.Object, "status", "loadBalancer", "ingress"); len(ing) > 0 {
			continue
		}
		if err := unstructured.SetNestedSlice(s.Object, []any{map[string]any{"ip": lbAddress}}, "status", "loadBalancer", "ingress"); err != nil {
			return err
		}
		if _, err := lb.c.Dyn.Resource(gvrService).Namespace(EnvoyGatewayNS).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("cannot give Service %s an address: %w", s.GetName(), err)
		}
	}
	return nil
}

// Sidecar returns AI Gateway's ext-proc sidecar in a pod's spec, as a
// native sidecar (an init container) or, on clusters older than 1.33, a
// container; nil when the pod has none.
func Sidecar(p *corev1.Pod) *corev1.Container {
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == sidecarName {
				return &cs[i]
			}
		}
	}
	return nil
}

// StartExtProc starts AI Gateway's external processor, as its sidecar runs
// in an Envoy pod, on the filter config given (the controller's
// filter-config Secret's filter-config.yaml, which the sidecar mounts:
// ai-gateway v1.0.0 internal/controller/gateway_mutator.go), and returns
// its gRPC address once its admin server says it is healthy. The config
// file, which holds the backends' credentials, is the test's alone (0600,
// in a folder removed after the test), and the process is stopped when
// the test ends.
func (c *Cluster) StartExtProc(ctx context.Context, tb testing.TB, config []byte) string {
	tb.Helper()
	dir := tb.TempDir()
	path := filepath.Join(dir, "filter-config.yaml")
	Must(tb, os.WriteFile(path, config, 0o600))
	grpcPort, adminPort := c.Procs.FreePort(), c.Procs.FreePort()
	p := c.Procs.Start("ai-gateway-extproc", nil, c.Bins[ToolExtProc.Name],
		"-configPath="+path,
		"-extProcAddr=127.0.0.1:"+strconv.Itoa(grpcPort),
		"-adminPort="+strconv.Itoa(adminPort))
	tb.Cleanup(func() { p.Stop(5 * time.Second) })
	// /health answers 200 once the ext_proc's own gRPC health check does
	// (ai-gateway v1.0.0 cmd/extproc/mainlib/admin.go).
	Must(tb, WaitFor(ctx, p, 100*time.Millisecond, "AI Gateway's ext_proc healthy", func(ctx context.Context) (bool, error) {
		_, err := httpGet(ctx, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/health", adminPort), "")
		return err == nil, err
	}))
	return fmt.Sprintf("127.0.0.1:%d", grpcPort)
}
