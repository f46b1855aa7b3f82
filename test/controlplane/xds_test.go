package controlplane

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
)

// What Envoy is told. No Envoy runs here, so the last step a test can see
// is the configuration Envoy Gateway serves our Gateway's Envoy over xDS,
// which already holds AI Gateway's extension-server changes (Envoy Gateway
// publishes only what its extension hook returns). tools/xds-reader reads
// it as that Envoy would and prints it as JSON, key material redacted.

// xdsPort is Envoy Gateway's xDS server (gateway v1.8.1
// internal/xds/bootstrap/bootstrap.go, DefaultXdsServerPort), served inside
// its network namespace and forwarded to the host's loopback.
const xdsPort = 18000

// toolXDSReader is the suite's own reader. Its cached binary is named by a
// hash of its source, so a changed reader is rebuilt.
var toolXDSReader = tool{name: "xds-reader", version: xdsReaderVersion(), module: "xds-reader",
	pkg: "github.com/modelplaneai/function-inference-gateway/test/controlplane/tools/xds-reader"}

// xdsReaderVersion hashes the reader's source files.
func xdsReaderVersion() string {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum", "main.go", "decode.go", "types.go"} {
		b, err := os.ReadFile(filepath.Join("tools", "xds-reader", f))
		if err != nil {
			return "unreadable"
		}
		h.Write(b)
	}
	return "src-" + hex.EncodeToString(h.Sum(nil))[:12]
}

// xdsDump is what the reader prints: resources by kind.
type xdsDump map[string][]map[string]any

// writeEnvoyCerts writes the client certificate Envoy pods use, certgen's
// Secret envoy-gateway-system/envoy, signed by the CA Envoy Gateway's xDS
// server trusts (gateway v1.8.1 internal/crypto/cert_load.go).
func (c *cluster) writeEnvoyCerts(ctx context.Context) string {
	return c.writeCertgenSecret(ctx, "envoy", filepath.Join(c.dir, "envoy-certs"))
}

// serviceCluster is the node cluster Envoy Gateway gives our Gateway's
// Envoy (--service-cluster in the Deployment's args, gateway v1.8.1
// internal/infrastructure/common/proxy_args.go): the key of the Gateway's
// snapshot.
func (sc *scenarios) serviceCluster(ctx context.Context) string {
	d := sc.envoyDeployment(ctx)
	if d == nil {
		return ""
	}
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		args, _, _ := unstructured.NestedStringSlice(c.(map[string]any), "args")
		if i := slices.Index(args, "--service-cluster"); i >= 0 && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// readXDS reads our Gateway's xDS until check says nothing is missing (a
// reader never gets "no snapshot": it waits, so every read has a
// deadline), writes it to $CONTROLPLANE_XDS/<name>.json when that is set,
// and returns it. A dump that holds a forbidden secret fails the test.
func (sc *scenarios) readXDS(t *testing.T, name string, check func(xdsDump) string) xdsDump {
	t.Helper()
	var dump xdsDump
	var raw []byte
	sc.eventually(t, waitSettle, "the xDS of our Gateway: "+name, func(ctx context.Context) string {
		node := sc.serviceCluster(ctx)
		if node == "" {
			return "no --service-cluster on the Envoy Deployment yet"
		}
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		var stderr bytes.Buffer
		cmd := exec.CommandContext(rctx, sc.c.bins[toolXDSReader.name],
			"-address", fmt.Sprintf("127.0.0.1:%d", xdsPort), "-cert-dir", sc.c.envoyCerts,
			"-node-cluster", node, "-node-id", "controlplane-suite-"+name, "-timeout", "15s")
		cmd.Stderr = &stderr
		// A reader that overstays is asked for its goroutines first, so
		// that the failure says where it waited.
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
		cmd.WaitDelay = 3 * time.Second
		out, err := cmd.Output()
		if err != nil {
			return fmt.Sprintf("the reader failed: %v: %s", err, strings.TrimSpace(stderr.String()))
		}
		d, err := decodeDump(out)
		if err != nil {
			return fmt.Sprintf("cannot decode the reader's output: %v", err)
		}
		dump, raw = d, out
		msg := check(d)
		if dir := os.Getenv("CONTROLPLANE_XDS"); dir != "" && msg != "" {
			// The last read that did not pass, to look at if none does.
			_ = os.MkdirAll(dir, 0o755)
			_ = os.WriteFile(filepath.Join(dir, name+".waiting.json"), out, 0o600)
		}
		return msg
	})
	sc.w.mu.Lock()
	secrets := slices.Clone(sc.w.secrets)
	sc.w.mu.Unlock()
	var whole map[string]any
	must(t, json.Unmarshal(raw, &whole))
	if found := findSecrets(&unstructured.Unstructured{Object: whole}, secrets); len(found) > 0 {
		t.Fatalf("the xDS dump %s holds secrets after redaction: %v", name, found)
	}
	if dir := os.Getenv("CONTROLPLANE_XDS"); dir != "" {
		must(t, os.MkdirAll(dir, 0o755))
		writeFile(t, filepath.Join(dir, name+".json"), raw)
		t.Logf("wrote the xDS of our Gateway to %s", filepath.Join(dir, name+".json"))
	}
	return dump
}

// decodeDump reads the reader's output: the resources by kind (its other
// keys, the versions and the types not answered, are for people).
func decodeDump(out []byte) (xdsDump, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(out, &raw); err != nil {
		return nil, err
	}
	d := xdsDump{}
	for _, k := range []string{"listeners", "routes", "clusters", "endpoints", "secrets"} {
		var list []map[string]any
		if err := json.Unmarshal(raw[k], &list); err != nil {
			return nil, fmt.Errorf("cannot read its %s: %w", k, err)
		}
		d[k] = list
	}
	return d, nil
}

// gatewayListeners are the listeners of our Gateway, named
// <namespace>/<gateway>/<listener> by Envoy Gateway.
func (d xdsDump) gatewayListeners() []map[string]any {
	var out []map[string]any
	for _, l := range d["listeners"] {
		if n, _ := l["name"].(string); strings.HasPrefix(n, gatewayNS+"/"+gatewayXRName+"/") {
			out = append(out, l)
		}
	}
	return out
}

// modelRoute finds the route that matches x-ai-eg-model: model, and the
// route configuration it is in.
func (d xdsDump) modelRoute(model string) (route map[string]any, config string) {
	for _, rc := range d["routes"] {
		vhs, _ := rc["virtual_hosts"].([]any)
		for _, vh := range vhs {
			routes, _ := vh.(map[string]any)["routes"].([]any)
			for _, r := range routes {
				rm, _ := r.(map[string]any)
				hs, _, _ := unstructured.NestedSlice(rm, "match", "headers")
				for _, h := range hs {
					hm, _ := h.(map[string]any)
					exact, _, _ := unstructured.NestedString(hm, "string_match", "exact")
					if hm["name"] == "x-ai-eg-model" && exact == model {
						n, _ := rc["name"].(string)
						return rm, n
					}
				}
			}
		}
	}
	return nil, ""
}

// cluster finds a cluster by name.
func (d xdsDump) cluster(name string) map[string]any {
	for _, c := range d["clusters"] {
		if c["name"] == name {
			return c
		}
	}
	return nil
}

// priorities are the priorities of a cluster's inline load assignment, in
// order of its localities.
func priorities(c map[string]any) []int64 {
	eps, _, _ := unstructured.NestedSlice(c, "load_assignment", "endpoints")
	out := make([]int64, 0, len(eps))
	for _, e := range eps {
		p, _ := e.(map[string]any)["priority"].(float64) // protojson omits 0
		out = append(out, int64(p))
	}
	return out
}

// checkBodyLimit: every listener of our Gateway buffers the configured
// limit (the ClientTrafficPolicy's bufferLimit, default 50Mi), set by
// Envoy Gateway as per_connection_buffer_limit_bytes (gateway v1.8.1
// internal/xds/translator/listener.go).
func checkBodyLimit(want int64) func(xdsDump) string {
	return func(d xdsDump) string {
		ls := d.gatewayListeners()
		if len(ls) == 0 {
			return "no listener of our Gateway yet"
		}
		for _, l := range ls {
			got, _ := l["per_connection_buffer_limit_bytes"].(float64)
			if int64(got) != want {
				return fmt.Sprintf("listener %v: per_connection_buffer_limit_bytes %v, want %d", l["name"], l["per_connection_buffer_limit_bytes"], want)
			}
		}
		return ""
	}
}

// checkFailover: the model's route sends to one cluster (never
// weighted_clusters), whose localities carry the tiers' priorities in
// order (AI Gateway's extension server writes them by backendRef position:
// ai-gateway v1.0.0 internal/extensionserver/post_translate_modify.go,
// maybeModifyCluster), and retries on the configured status codes, moving
// to the next priority each time (previous_priorities; gateway v1.8.1
// internal/xds/translator/route.go, buildRetryPolicy).
func checkFailover(model string, wantPriorities []int64, wantCodes []int64, wantRetries int64) func(xdsDump) string {
	return func(d xdsDump) string {
		r, _ := d.modelRoute(model)
		if r == nil {
			return fmt.Sprintf("no route matches x-ai-eg-model %q yet", model)
		}
		action, _ := r["route"].(map[string]any)
		if action == nil {
			return fmt.Sprintf("the route of %q has no route action: %v", model, r)
		}
		if _, split := action["weighted_clusters"]; split {
			return fmt.Sprintf("the route of %q splits by weight across clusters, so its fallback tier takes live traffic: %v", model, action["weighted_clusters"])
		}
		name, _ := action["cluster"].(string)
		c := d.cluster(name)
		if c == nil {
			return fmt.Sprintf("the route of %q names cluster %q, which is not served", model, name)
		}
		if got := priorities(c); !slices.Equal(got, wantPriorities) {
			return fmt.Sprintf("cluster %q: locality priorities %v, want %v", name, got, wantPriorities)
		}
		rp, _ := action["retry_policy"].(map[string]any)
		if rp == nil {
			return fmt.Sprintf("the route of %q has no retry policy", model)
		}
		var codes []int64
		cs, _ := rp["retriable_status_codes"].([]any)
		for _, c := range cs {
			f, _ := c.(float64)
			codes = append(codes, int64(f))
		}
		for _, w := range wantCodes {
			if !slices.Contains(codes, w) {
				return fmt.Sprintf("the retry policy of %q retries status codes %v, not %d", model, codes, w)
			}
		}
		if n, _ := rp["num_retries"].(float64); int64(n) != wantRetries {
			return fmt.Sprintf("the retry policy of %q has num_retries %v, want %d", model, rp["num_retries"], wantRetries)
		}
		if p, _, _ := unstructured.NestedString(rp, "retry_priority", "name"); p != "envoy.retry_priorities.previous_priorities" {
			return fmt.Sprintf("the retry policy of %q has retry_priority %q, want envoy.retry_priorities.previous_priorities", model, p)
		}
		return ""
	}
}

// all checks each in turn.
func all(checks ...func(xdsDump) string) func(xdsDump) string {
	return func(d xdsDump) string {
		for _, c := range checks {
			if msg := c(d); msg != "" {
				return msg
			}
		}
		return ""
	}
}

// envoyIsTold is scenario 2's look at the xDS: the ready ModelRoute, two
// tiers, on a gateway with the default failover and buffer settings. It
// runs only with CONTROLPLANE_XDS set until it has passed more runs (see
// the README's control-plane section).
func (sc *scenarios) envoyIsTold(t *testing.T) {
	t.Helper()
	if os.Getenv("CONTROLPLANE_XDS") == "" {
		t.Logf("xDS checks skipped: set CONTROLPLANE_XDS=<dir> to read our Gateway's xDS and write the dumps there")
		return
	}
	model := teamControlNS + "/" + routeName // the ModelRoute sets no spec.model
	d := sc.readXDS(t, "scenario-2", all(
		checkBodyLimit(gateway.DefaultBufferLimit.Value()),
		checkFailover(model, []int64{0, 1}, []int64{429, 503}, int64(gateway.DefaultNumRetries)),
	))
	// ndots 1 on the Envoy pods, through the EnvoyProxy's
	// envoyDeployment.patch, as the real Envoy Gateway renders it.
	dep := sc.envoyDeployment(sc.ctx)
	if dep == nil {
		t.Fatalf("no Envoy Deployment")
	}
	opts, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "dnsConfig", "options")
	if !slices.ContainsFunc(opts, func(o any) bool {
		m, _ := o.(map[string]any)
		return m["name"] == "ndots" && m["value"] == "1"
	}) {
		t.Errorf("the Envoy Deployment's pods have dnsConfig.options %v, want ndots 1", opts)
	}
	r, rc := d.modelRoute(model)
	t.Logf("xDS: %d listeners, %d route configurations, %d clusters; the route of %q in %q sends to %v", len(d["listeners"]), len(d["routes"]), len(d["clusters"]), model, rc, r["route"].(map[string]any)["cluster"])
}
