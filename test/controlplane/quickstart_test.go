package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/route"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
	"github.com/modelplaneai/function-inference-gateway/test/internal/toolchain"
)

// codeBlock is one fenced block of a Markdown page: its language and text.
type codeBlock struct {
	lang, text string
}

// sectionSteps reads the fenced code blocks under each "### N." heading of
// a Markdown page's "## <section>", by N; blocks under another heading of
// the section count as step 0.
func sectionSteps(page []byte, section string) (map[int][]codeBlock, error) {
	steps := map[int][]codeBlock{}
	step, in := -1, false
	var block *codeBlock
	sc := bufio.NewScanner(bytes.NewReader(page))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case block != nil && strings.HasPrefix(line, "```"):
			steps[step] = append(steps[step], *block)
			block = nil
		case block != nil:
			block.text += line + "\n"
		case strings.HasPrefix(line, "## "):
			in = line == "## "+section
			step = -1
		case in && strings.HasPrefix(line, "### "):
			step = -1
			if _, err := fmt.Sscanf(line, "### %d.", &step); err != nil {
				step = 0 // the prerequisites
			}
		case in && strings.HasPrefix(line, "```"):
			block = &codeBlock{lang: strings.TrimPrefix(line, "```")}
		}
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("cannot find a \"## %s\" section with fenced code blocks", section)
	}
	return steps, sc.Err()
}

// quickStartShape is what TestQuickStart runs of each step, by the
// languages of its blocks. Steps 1 and 2 (the gateway cluster's identity,
// provider-kubernetes, the Function and the Configuration) are the
// suite's own: it runs the provider and the function out of cluster under
// the names deploy/control-plane gives them, applies its
// ClusterProviderConfig and dry-runs the rest (DryRunControlPlane).
var quickStartShape = map[int][]string{
	3: {"sh", "yaml"},
	4: {"sh", "yaml"},
	5: {"sh"},
	6: {"sh", "python"},
}

// TestQuickStartBlocks checks, without a control plane, that the README's
// Quick start still has the blocks TestQuickStart follows.
func TestQuickStartBlocks(t *testing.T) {
	steps := readQuickStart(t)
	got := map[int][]string{}
	for n := range quickStartShape {
		for _, b := range steps[n] {
			got[n] = append(got[n], b.lang)
		}
	}
	if diff := cmp.Diff(quickStartShape, got); diff != "" {
		t.Errorf("the README's Quick start steps 3 to 6 have code blocks of other languages than TestQuickStart follows: -want, +got:\n%s", diff)
	}
}

func readQuickStart(t *testing.T) map[int][]codeBlock {
	t.Helper()
	return readSection(t, "README.md", "Quick start")
}

// readSection reads the "## <section>" of the Markdown page at path (from
// the repository's root) as sectionSteps does.
func readSection(t *testing.T, path, section string) map[int][]codeBlock {
	t.Helper()
	root, err := toolchain.Root()
	harness.Must(t, err)
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
	harness.Must(t, err)
	steps, err := sectionSteps(b, section)
	if err != nil {
		t.Fatalf("cannot read %s: %v", path, err)
	}
	return steps
}

// TestQuickStart follows the README's Quick start from step 3 on, as a
// reader would, on a control plane of its own: it runs each shell block
// with bash, with kubectl and the crossplane CLI built at the versions the
// suite runs, and applies each YAML block with kubectl. No Envoy runs
// here, so step 6's curl is a stand-in that records what it was asked to
// send; the test then checks, in the xDS Envoy Gateway serves our
// Gateway's Envoy, that this very request would be authenticated as the
// caller and routed to the model on the https listener of the README's
// hostname, and that /healthz answers there.
func TestQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole control plane")
	}
	steps := readQuickStart(t)
	// The reader creates the team's namespace in step 4.
	sc := bringUpWith(t, upOptions{readerCreatesTeamNamespace: true})
	r := newReader(t, sc)

	for _, n := range []int{3, 4} {
		r.follow(t, "the Quick start", n, steps[n])
		if n == 3 {
			// The callers' keys the reader made: no Object, XR or xDS
			// dump may hold them.
			s, err := sc.get(sc.ctx, harness.GVRSecret, harness.ObjectNS, "platform-callers")
			harness.Must(t, err)
			data, _, _ := unstructured.NestedStringMap(s.Object, "data")
			for client, key := range data {
				sc.w.Forbid("the key of caller "+client, key)
			}
		}
	}

	start := time.Now()
	sc.eventually(t, waitSettle, "GatewayReady=True", func(ctx context.Context) string {
		return wantCondition(sc.gatewayXR(ctx), gateway.ConditionType, "True")
	})
	t.Logf("GatewayReady=True %s after step 4", time.Since(start).Round(100*time.Millisecond))
	sc.eventually(t, waitRoute, "RoutingReady=True", func(ctx context.Context) string {
		return wantCondition(sc.routeXR(ctx), route.ConditionType, "True")
	})
	t.Logf("RoutingReady=True %s after step 4", time.Since(start).Round(100*time.Millisecond))

	// Step 5: what the reader sees.
	out := r.run(t, "the Quick start, step 5", steps[5][0].text, nil)
	for _, want := range []string{harness.GatewayXRName, harness.RouteName, "envoy-deployment"} {
		if !strings.Contains(out, want) {
			t.Errorf("step 5 printed no %q:\n%s", want, out)
		}
	}
	// kubectl get's printer columns, from the XRDs: each table's header,
	// then its row.
	// Read by the header's column offsets: kubectl leaves a cell blank
	// when its field is unset (ROUTED, on a route with gatewayName).
	ready := map[string]string{}
	var header string
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == "NAME":
			header = line
		case len(f) > 0 && (f[0] == harness.GatewayXRName || f[0] == harness.RouteName):
			for _, h := range []string{"GATEWAY-READY", "ROUTING-READY"} {
				if v, ok := column(header, line, h); ok {
					ready[h] = v
				}
			}
		}
	}
	if want := map[string]string{"GATEWAY-READY": "True", "ROUTING-READY": "True"}; !cmp.Equal(ready, want) {
		t.Errorf("step 5: kubectl get printed the readiness columns %v, want %v:\n%s", ready, want, out)
	}

	// Step 6: the calls, and what Envoy is told about them.
	r.run(t, "the Quick start, step 6", steps[6][0].text, nil)
	calls := r.curlCalls(t)
	gw, rt := sc.gatewayXR(sc.ctx), sc.routeXR(sc.ctx)
	hostname, _, _ := unstructured.NestedString(gw.Object, "spec", "hostname")
	base, _, _ := unstructured.NestedString(gw.Object, "status", "endpoints", "openAI")
	model, _, _ := unstructured.NestedString(rt.Object, "status", "model")
	secret, err := sc.get(sc.ctx, harness.GVRSecret, harness.ObjectNS, "platform-callers")
	harness.Must(t, err)
	data, _, _ := unstructured.NestedStringMap(secret.Object, "data")
	clients := slices.Sorted(maps.Keys(data))
	if len(calls) != 2 {
		t.Fatalf("step 6 ran curl %d times, want 2 (a model call and /healthz): %v", len(calls), calls)
	}
	call, health := calls[0], calls[1]
	if want := base + "/chat/completions"; call.url != want || !strings.HasPrefix(want, "https://"+hostname+"/") {
		t.Errorf("step 6 calls %q, want %q on https://%s", call.url, want, hostname)
	}
	client, ok := r.callerOf(t, secret, call.header("Authorization"))
	if !ok {
		t.Errorf("step 6 sends Authorization %q, which is no caller's key in platform-callers", call.header("Authorization"))
	}
	var body struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal([]byte(call.data), &body); err != nil || body.Model != model || model == "" {
		t.Errorf("step 6 sends the body %q, want JSON with the model %q (status.model): %v", call.data, model, err)
	}
	if want := "https://" + hostname + names.HealthPath; health.url != want {
		t.Errorf("step 6 checks health at %q, want %q", health.url, want)
	}
	py := steps[6][1].text
	for what, want := range map[string]string{"base_url": base, "model": model} {
		m := regexp.MustCompile(what + `="([^"]*)"`).FindStringSubmatch(py)
		if len(m) < 2 || m[1] != want {
			t.Errorf("step 6's Python sets %s to %v, want %q", what, m, want)
		}
	}

	sc.readXDS(t, "quick-start", all(
		checkRouteOn(model, gateway.ListenerHTTPS),
		checkVirtualHost(gateway.ListenerHTTPS, hostname),
		checkCallerAuth(clients),
		checkFrontDoorTLS(hostname),
		checkFailover(model, []int64{0, 1}, []int64{429, 503}, int64(v1alpha1.DefaultNumRetries)),
	))
	t.Logf("step 6's call to %s as caller %s for model %q: Envoy is told to check the caller's key and route the model on the https listener of %s", call.url, client, model, hostname)

	sc.noSecretsInObjects(t, "after the Quick start")
	sc.w.Check(t)
	obs, viol := sc.w.SidecarSummary()
	t.Logf("sidecar invariant: %d observations, %d violations", obs, viol)
	if obs == 0 {
		t.Errorf("the sidecar invariant was never checked")
	}
}

// checkVirtualHost: the listener's route configuration serves host.
func checkVirtualHost(listener, host string) func(xdsDump) string {
	return func(d xdsDump) string {
		rc := d.routeConfig(listener)
		if rc == nil {
			return fmt.Sprintf("no route configuration for the %s listener", listener)
		}
		vhs, _ := rc["virtual_hosts"].([]any)
		var domains []any
		for _, vh := range vhs {
			ds, _ := vh.(map[string]any)["domains"].([]any)
			if slices.Contains(ds, any(host)) {
				return ""
			}
			domains = append(domains, ds...)
		}
		return fmt.Sprintf("the %s listener serves the domains %v, not %s", listener, domains, host)
	}
}

// reader is a shell as the README's reader has one: a working directory
// holding the TLS certificate step 3 names, and kubectl, the crossplane
// CLI and a recording curl first on PATH, pointed at the control plane.
type reader struct {
	dir, curlDir string
	env          []string
}

func newReader(t *testing.T, sc *scenarios) *reader {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	r := &reader{dir: dir, curlDir: filepath.Join(dir, "curl-calls")}
	for _, d := range []string{bin, r.curlDir} {
		harness.Must(t, os.MkdirAll(d, 0o755))
	}
	harness.Must(t, os.Symlink(sc.c.Bins[harness.ToolKubectl.Name], filepath.Join(bin, "kubectl")))
	harness.Must(t, os.Symlink(sc.c.Bins["crossplane-cli"], filepath.Join(bin, "crossplane")))
	// curl writes its arguments, NUL-separated, one file per call.
	harness.WriteFile(t, filepath.Join(bin, "curl"), []byte(`#!/usr/bin/env bash
n=$(ls "$QUICKSTART_CURL_DIR" | wc -l)
printf '%s\0' "$@" > "$QUICKSTART_CURL_DIR/call-$n"
`))
	harness.Must(t, os.Chmod(filepath.Join(bin, "curl"), 0o755))
	if _, err := exec.LookPath("openssl"); err != nil {
		// Step 3 makes the callers' keys with openssl rand -hex; a
		// machine without openssl gets that much of it.
		harness.WriteFile(t, filepath.Join(bin, "openssl"), []byte(`#!/usr/bin/env bash
[ "$1 $2" = "rand -hex" ] || { echo "this stand-in only does rand -hex N" >&2; exit 1; }
od -An -tx1 -N"$3" /dev/urandom | tr -d ' \n'
`))
		harness.Must(t, os.Chmod(filepath.Join(bin, "openssl"), 0o755))
	}
	cert := selfSigned(t, "llm.example.com", time.Now().Add(-time.Hour), time.Now().Add(90*24*time.Hour))
	sc.w.Forbid("the private key of the Quick start's TLS certificate", base64.StdEncoding.EncodeToString(cert.KeyPEM))
	harness.WriteFile(t, filepath.Join(dir, "tls.crt"), cert.CertPEM)
	harness.WriteFile(t, filepath.Join(dir, "tls.key"), cert.KeyPEM)
	key := base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("sk-or-quickstart-%d", time.Now().UnixNano())))
	plain, _ := base64.StdEncoding.DecodeString(key)
	sc.w.Forbid("the Quick start's OpenRouter key", key)
	r.env = append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+sc.c.Kubeconfig,
		"QUICKSTART_CURL_DIR="+r.curlDir,
		"OPENROUTER_API_KEY="+string(plain),
	)
	return r
}

// follow runs step n's blocks in order: shell blocks with bash, YAML
// blocks through kubectl apply.
func (r *reader) follow(t *testing.T, section string, n int, blocks []codeBlock) {
	t.Helper()
	for i, b := range blocks {
		what := fmt.Sprintf("%s, step %d, block %d", section, n, i+1)
		switch b.lang {
		case "sh":
			r.run(t, what, b.text, nil)
		case "yaml":
			// kubectl warns of a field the schema does not know, and the
			// API server drops it: a README typo would pass unseen.
			if out := r.run(t, what, "kubectl apply -f -", []byte(b.text)); strings.Contains(out, "Warning:") {
				t.Errorf("%s: kubectl warned:\n%s", what, out)
			}
		}
	}
}

// run runs script with bash, as the reader pastes it, and returns what it
// printed; a failure fails the test with the output.
func (r *reader) run(t *testing.T, what, script string, stdin []byte) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = r.dir, r.env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cannot follow the README's %s: %v\n--- the block\n%s--- what it printed\n%s", what, err, script, out)
	}
	t.Logf("README %s:\n%s", what, out)
	return string(out)
}

// curlCall is what one run of curl was asked to do.
type curlCall struct {
	url     string
	headers []string
	data    string
}

func (c curlCall) header(name string) string {
	for _, h := range c.headers {
		if k, v, ok := strings.Cut(h, ":"); ok && strings.EqualFold(k, name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// curlCalls reads the calls the recording curl saw, in order.
func (r *reader) curlCalls(t *testing.T) []curlCall {
	t.Helper()
	var out []curlCall
	for i := 0; ; i++ {
		b, err := os.ReadFile(filepath.Join(r.curlDir, fmt.Sprintf("call-%d", i)))
		if os.IsNotExist(err) {
			return out
		}
		harness.Must(t, err)
		var c curlCall
		args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		for j := 0; j < len(args); j++ {
			switch a := args[j]; {
			case (a == "-H" || a == "--header") && j+1 < len(args):
				j++
				c.headers = append(c.headers, args[j])
			case (a == "-d" || a == "--data") && j+1 < len(args):
				j++
				c.data = args[j]
			case !strings.HasPrefix(a, "-"):
				if u, err := url.Parse(a); err == nil && u.Scheme != "" {
					c.url = a
				}
			}
		}
		out = append(out, c)
	}
}

// callerOf returns the client whose key in the callers' Secret the
// Authorization header carries.
func (r *reader) callerOf(t *testing.T, secret *unstructured.Unstructured, authorization string) (string, bool) {
	t.Helper()
	key, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok || key == "" {
		return "", false
	}
	data, _, _ := unstructured.NestedStringMap(secret.Object, "data")
	for client, v := range data {
		if b, err := base64.StdEncoding.DecodeString(v); err == nil && string(b) == key {
			return client, true
		}
	}
	return "", false
}

// column is the cell of the column named name in a row of kubectl's table
// under header: from the column's offset in the header to the next
// column's.
func column(header, row, name string) (string, bool) {
	i := strings.Index(header, name)
	if i < 0 || i >= len(row) {
		return "", false
	}
	end := len(row)
	if j := strings.IndexFunc(header[i+len(name):], func(r rune) bool { return r != ' ' }); j >= 0 {
		end = min(end, i+len(name)+j)
	}
	return strings.TrimSpace(row[i:end]), true
}

// TestColumn: a cell is read by its header's offsets, blank cells included.
func TestColumn(t *testing.T) {
	header := "NAME       MODEL              ROUTING-READY   REASON          USABLE   ROUTED   SYNCED"
	row := "qwen3-8b   ml-team/qwen3-8b   True            RouteAccepted   2                 True"
	cases := map[string]struct {
		name, want string
		ok         bool
	}{
		"Ready":   {name: "ROUTING-READY", want: "True", ok: true},
		"Blank":   {name: "ROUTED", want: "", ok: true},
		"After":   {name: "SYNCED", want: "True", ok: true},
		"Missing": {name: "ADDRESS", want: "", ok: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := column(header, row, tc.name)
			if diff := cmp.Diff(tc.want+"/"+fmt.Sprint(tc.ok), got+"/"+fmt.Sprint(ok)); diff != "" {
				t.Errorf("column(..., %q): -want, +got:\n%s", tc.name, diff)
			}
		})
	}
}
