package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// What Envoy is told. No Envoy runs here, so the last step a test can see
// is the configuration Envoy Gateway serves our Gateway's Envoy over xDS,
// which already holds AI Gateway's extension-server changes (Envoy Gateway
// publishes only what its extension hook returns). tools/xds-reader reads
// it as that Envoy would and prints it as JSON, key material redacted.

// xdsDump is what the reader prints: resources by kind.
type xdsDump map[string][]map[string]any

// serviceCluster is the node cluster Envoy Gateway gives our Gateway's
// Envoy (--service-cluster in the Deployment's args, gateway v1.8.3
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
	start, reads, lastCheck := time.Now(), 0, ""
	sc.eventually(t, waitSettle, "the xDS of our Gateway: "+name, func(ctx context.Context) string {
		reads++
		node := sc.serviceCluster(ctx)
		if node == "" {
			return "no --service-cluster on the Envoy Deployment yet"
		}
		rctx, cancel := context.WithTimeout(ctx, 25*time.Second)
		defer cancel()
		var stderr bytes.Buffer
		cmd := exec.CommandContext(rctx, sc.c.Bins[harness.ToolXDSReader.Name],
			"-address", fmt.Sprintf("127.0.0.1:%d", harness.XDSPort), "-cert-dir", sc.c.EnvoyCerts,
			"-node-cluster", node, "-node-id", "controlplane-suite-"+name, "-timeout", "15s")
		cmd.Stderr = &stderr
		// The reader stops itself 5 s past its -timeout with its
		// goroutines on stderr; one that still overstays is asked for
		// them here, so that the failure says where it waited.
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
		cmd.WaitDelay = 3 * time.Second
		out, err := cmd.Output()
		if err != nil {
			if ctx.Err() != nil && lastCheck != "" {
				// The wait ended during this read, which was stopped:
				// what the last complete read lacked is the answer.
				return lastCheck
			}
			return fmt.Sprintf("the reader failed: %v: %s", err, strings.TrimSpace(stderr.String()))
		}
		d, err := decodeDump(out)
		if err != nil {
			return fmt.Sprintf("cannot decode the reader's output: %v", err)
		}
		dump, raw = d, out
		msg := check(d)
		lastCheck = msg
		if dir := os.Getenv("CONTROLPLANE_XDS"); dir != "" && msg != "" {
			// The last read that did not pass, to look at if none does.
			_ = os.MkdirAll(dir, 0o755)
			_ = os.WriteFile(filepath.Join(dir, name+".waiting.json"), out, 0o600)
		}
		return msg
	})
	t.Logf("the xDS of our Gateway (%s) passed its checks after %s and %d reads", name, time.Since(start).Round(time.Millisecond), reads)
	sc.w.Mu.Lock()
	secrets := slices.Clone(sc.w.Secrets)
	sc.w.Mu.Unlock()
	var whole map[string]any
	harness.Must(t, json.Unmarshal(raw, &whole))
	if found := harness.FindSecrets(&unstructured.Unstructured{Object: whole}, secrets); len(found) > 0 {
		t.Fatalf("the xDS dump %s holds secrets after redaction: %v", name, found)
	}
	if dir := os.Getenv("CONTROLPLANE_XDS"); dir != "" {
		harness.Must(t, os.MkdirAll(dir, 0o755))
		harness.WriteFile(t, filepath.Join(dir, name+".json"), raw)
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
		if n, _ := l["name"].(string); strings.HasPrefix(n, harness.GatewayNS+"/"+harness.GatewayXRName+"/") {
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
// Envoy Gateway as per_connection_buffer_limit_bytes (gateway v1.8.3
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
// to the next priority each time (previous_priorities; gateway v1.8.3
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
		// A locality's priority is what makes its tier, not its place in
		// the list.
		if got, want := slices.Sorted(slices.Values(priorities(c))), slices.Sorted(slices.Values(wantPriorities)); !slices.Equal(got, want) {
			return fmt.Sprintf("cluster %q: locality priorities %v, want %v", name, got, want)
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

// locality is what Envoy is told of one backend of a model's route: its
// tier, its weight in it, and its endpoints' port (0: not checked).
type locality struct {
	priority, weight, port int64
}

// checkLocalities: the one cluster the route of model names has one
// locality for each backend in want, by its Backend's name, and no other,
// each of the tier, the weight and the port wanted. Envoy Gateway puts
// every backend of a rule into one cluster, a locality each, of the
// backendRef's priority and weight (gateway v1.8.3
// internal/xds/translator/cluster.go, buildWeightedLocalities).
func checkLocalities(model string, want map[string]locality) func(xdsDump) string {
	return func(d xdsDump) string {
		r, _ := d.modelRoute(model)
		if r == nil {
			return fmt.Sprintf("no route matches x-ai-eg-model %q yet", model)
		}
		name, _, _ := unstructured.NestedString(r, "route", "cluster")
		c := d.cluster(name)
		if c == nil {
			return fmt.Sprintf("the route of %q names cluster %q, which is not served", model, name)
		}
		eps, _, _ := unstructured.NestedSlice(c, "load_assignment", "endpoints")
		got := map[string]locality{}
		for _, e := range eps {
			backend := ""
			for b := range want {
				if localityOfBackend(e, b) {
					backend = b
				}
			}
			if backend == "" {
				return fmt.Sprintf("cluster %q has a locality of none of the backends %v: %v", name, slices.Sorted(maps.Keys(want)), e.(map[string]any)["metadata"])
			}
			m := e.(map[string]any)
			p, _ := m["priority"].(float64) // protojson omits 0
			w, _ := m["load_balancing_weight"].(float64)
			l := locality{priority: int64(p), weight: int64(w)}
			if want[backend].port != 0 {
				lbs, _ := m["lb_endpoints"].([]any)
				for _, lb := range lbs {
					port, _, _ := unstructured.NestedFloat64(lb.(map[string]any), "endpoint", "address", "socket_address", "port_value")
					if l.port != 0 && l.port != int64(port) {
						return fmt.Sprintf("cluster %q: the locality of %s has endpoints on ports %d and %v", name, backend, l.port, port)
					}
					l.port = int64(port)
				}
			}
			got[backend] = l
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(locality{})); diff != "" {
			return fmt.Sprintf("cluster %q of the route of %q: localities by Backend -want +got:\n%s", name, model, diff)
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
// tiers, on an open gateway with the default failover and buffer settings.
func (sc *scenarios) envoyIsTold(t *testing.T) {
	t.Helper()
	model := harness.TeamControlNS + "/" + harness.RouteName // the ModelRoute sets no spec.model
	d := sc.readXDS(t, "scenario-2", all(
		checkBodyLimit(v1alpha1.DefaultBufferLimit.Value()),
		checkFailover(model, []int64{0, 1}, []int64{429, 503}, int64(v1alpha1.DefaultNumRetries)),
		checkAIGatewayFilters,
		checkPassiveHealth(v1alpha1.DefaultPanicThreshold),
		checkCallerHeaderRemovedEarly,
		checkCallerLogged,
		checkNoCallerAuth,
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

// Envoy's names of the filters the checks look for.
const (
	hcmFilter              = "envoy.filters.network.http_connection_manager"
	extProcFilter          = "envoy.filters.http.ext_proc/aigateway"
	apiKeyAuthFilter       = "envoy.filters.http.api_key_auth"
	headerToMetadataFilter = "envoy.filters.http.header_to_metadata"
	routerFilter           = "envoy.filters.http.router"
	upstreamHTTPOptions    = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
)

// hcm is one HTTP connection manager of our Gateway and its listener.
type hcm struct {
	listener string
	config   map[string]any
}

// hcms are the HTTP connection managers of every filter chain of our
// Gateway's listeners.
func (d xdsDump) hcms() []hcm {
	var out []hcm
	for _, l := range d.gatewayListeners() {
		name, _ := l["name"].(string)
		chains, _ := l["filter_chains"].([]any)
		if dc, ok := l["default_filter_chain"]; ok {
			chains = append(chains, dc)
		}
		for _, ch := range chains {
			fs, _ := ch.(map[string]any)["filters"].([]any)
			for _, f := range fs {
				fm, _ := f.(map[string]any)
				if fm["name"] == hcmFilter {
					tc, _ := fm["typed_config"].(map[string]any)
					out = append(out, hcm{listener: name, config: tc})
				}
			}
		}
	}
	return out
}

// filterIndex is the position of the named HTTP filter in an HTTP
// connection manager, or -1.
func (h hcm) filterIndex(name string) int {
	fs, _ := h.config["http_filters"].([]any)
	return slices.IndexFunc(fs, func(f any) bool { return f.(map[string]any)["name"] == name })
}

// filter is the named HTTP filter's typed config, or nil.
func (h hcm) filter(name string) map[string]any {
	i := h.filterIndex(name)
	if i < 0 {
		return nil
	}
	tc, _ := h.config["http_filters"].([]any)[i].(map[string]any)["typed_config"].(map[string]any)
	return tc
}

// routes are every route of every route configuration, with a name for
// messages.
func (d xdsDump) routes() []map[string]any {
	var out []map[string]any
	for _, rc := range d["routes"] {
		vhs, _ := rc["virtual_hosts"].([]any)
		for _, vh := range vhs {
			rs, _ := vh.(map[string]any)["routes"].([]any)
			for _, r := range rs {
				out = append(out, r.(map[string]any))
			}
		}
	}
	return out
}

// modelRoutes are the routes that match a model (x-ai-eg-model), which
// AI Gateway generates from each AIGatewayRoute's rules.
// servesModels reports whether the route configuration named rc has a
// route that matches a model.
func (d xdsDump) servesModels(rc string) bool {
	for _, c := range d["routes"] {
		if c["name"] != rc {
			continue
		}
		vhs, _ := c["virtual_hosts"].([]any)
		for _, vh := range vhs {
			rs, _ := vh.(map[string]any)["routes"].([]any)
			for _, r := range rs {
				hs, _, _ := unstructured.NestedSlice(r.(map[string]any), "match", "headers")
				if slices.ContainsFunc(hs, func(h any) bool { return h.(map[string]any)["name"] == names.ModelHeader }) {
					return true
				}
			}
		}
	}
	return false
}

func (d xdsDump) modelRoutes() []map[string]any {
	var out []map[string]any
	for _, r := range d.routes() {
		hs, _, _ := unstructured.NestedSlice(r, "match", "headers")
		if slices.ContainsFunc(hs, func(h any) bool { return h.(map[string]any)["name"] == names.ModelHeader }) {
			out = append(out, r)
		}
	}
	return out
}

// perFilter is a route's per-filter config for the named filter, or nil.
func perFilter(r map[string]any, name string) map[string]any {
	m, _, _ := unstructured.NestedMap(r, "typed_per_filter_config", name)
	return m
}

// checkAIGatewayFilters: AI Gateway's extension server puts its ext_proc
// filter on every HTTP connection manager (disabled there) and enables it
// on each route it generated, and adds the upstream ext_proc to each
// cluster of those routes (ai-gateway v1.0.0
// internal/extensionserver/post_translate_modify.go).
func checkAIGatewayFilters(d xdsDump) string {
	hs := d.hcms()
	if len(hs) == 0 {
		return "no HTTP connection manager on our Gateway's listeners yet"
	}
	for _, h := range hs {
		if h.filterIndex(extProcFilter) < 0 {
			return fmt.Sprintf("listener %s: no %s filter", h.listener, extProcFilter)
		}
	}
	rs := d.modelRoutes()
	if len(rs) == 0 {
		return "no model route yet"
	}
	for _, r := range rs {
		pf := perFilter(r, extProcFilter)
		if pf == nil || pf["disabled"] == true {
			return fmt.Sprintf("route %v: %s not enabled: %v", r["name"], extProcFilter, pf)
		}
		cluster, _, _ := unstructured.NestedString(r, "route", "cluster")
		c := d.cluster(cluster)
		if c == nil {
			return fmt.Sprintf("route %v: cluster %q not served", r["name"], cluster)
		}
		fs, _, _ := unstructured.NestedSlice(c, "typed_extension_protocol_options", upstreamHTTPOptions, "http_filters")
		if !slices.ContainsFunc(fs, func(f any) bool { return f.(map[string]any)["name"] == extProcFilter }) {
			return fmt.Sprintf("cluster %q: no upstream %s filter", cluster, extProcFilter)
		}
	}
	return ""
}

// checkPassiveHealth: each model route's cluster ejects a backend after
// five consecutive 5xx for 30 s, checked every 5 s, up to every backend
// (the failover policy's passive health check), and has the panic
// threshold spec.failover asks for. Envoy Gateway writes
// healthy_panic_threshold only when it is not 50, Envoy's default (gateway
// v1.8.3 internal/xds/translator/cluster.go); protojson omits a 0 value.
func checkPassiveHealth(threshold int32) func(xdsDump) string {
	return func(d xdsDump) string {
		rs := d.modelRoutes()
		if len(rs) == 0 {
			return "no model route yet"
		}
		for _, r := range rs {
			name, _, _ := unstructured.NestedString(r, "route", "cluster")
			c := d.cluster(name)
			if c == nil {
				return fmt.Sprintf("route %v: cluster %q not served", r["name"], name)
			}
			od, _ := c["outlier_detection"].(map[string]any)
			want := map[string]any{"consecutive_5xx": 5.0, "interval": "5s", "base_ejection_time": "30s", "max_ejection_percent": 100.0}
			for k, v := range want {
				if od[k] != v {
					return fmt.Sprintf("cluster %q: outlier_detection.%s %v, want %v (outlier_detection %v)", name, k, od[k], v, od)
				}
			}
			got := float64(v1alpha1.DefaultPanicThreshold)
			if p, ok, _ := unstructured.NestedMap(c, "common_lb_config", "healthy_panic_threshold"); ok {
				got, _ = p["value"].(float64)
			}
			if got != float64(threshold) {
				return fmt.Sprintf("cluster %q: healthy panic threshold %v%%, want %d%% (common_lb_config %v)", name, got, threshold, c["common_lb_config"])
			}
		}
		return ""
	}
}

// checkCallerHeaderRemovedEarly: every HTTP connection manager removes a
// client's x-modelplane-caller in its early header mutation, before any
// filter or the routing reads it (the ClientTrafficPolicy's
// earlyRequestHeaders; gateway v1.8.3 internal/xds/translator/listener.go,
// buildEarlyHeaderMutation).
func checkCallerHeaderRemovedEarly(d xdsDump) string {
	hs := d.hcms()
	if len(hs) == 0 {
		return "no HTTP connection manager on our Gateway's listeners yet"
	}
	for _, h := range hs {
		if !holds(h.config["early_header_mutation_extensions"], "remove", names.CallerHeader) {
			return fmt.Sprintf("listener %s: the early header mutation does not remove %s: %v", h.listener, names.CallerHeader, h.config["early_header_mutation_extensions"])
		}
	}
	return ""
}

// holds reports whether v holds, at any depth, an object whose key is
// value.
func holds(v any, key string, value any) bool {
	switch x := v.(type) {
	case map[string]any:
		if x[key] == value {
			return true
		}
		for _, e := range x {
			if holds(e, key, value) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if holds(e, key, value) {
				return true
			}
		}
	}
	return false
}

// callerLogFormat is how the access log names the caller: the dynamic
// metadata AI Gateway's header_to_metadata filter writes, in AI Gateway's
// namespace io.envoy.ai_gateway.
var callerLogFormat = "%DYNAMIC_METADATA(io.envoy.ai_gateway:" + gateway.CallerMetadataKey + ")%"

// checkCallerLogged: every JSON access log of our Gateway's listeners
// logs the caller from dynamic metadata, and every HTTP connection manager
// copies x-modelplane-caller there after caller authentication has set it
// and before the router, whose upstream filters may remove the header
// (ai-gateway v1.0.0 internal/extensionserver/header_to_metadata.go).
func checkCallerLogged(d xdsDump) string {
	var formats []map[string]any
	for _, l := range d.gatewayListeners() {
		collect(l, "json_format", &formats)
	}
	if len(formats) == 0 {
		return "no JSON access log on our Gateway's listeners yet"
	}
	for _, f := range formats {
		if f["caller"] != callerLogFormat {
			return fmt.Sprintf("an access log logs the caller as %v, want %s", f["caller"], callerLogFormat)
		}
	}
	for _, h := range d.hcms() {
		i, router, auth := h.filterIndex(headerToMetadataFilter), h.filterIndex(routerFilter), h.filterIndex(apiKeyAuthFilter)
		if i < 0 || router < i || auth > i {
			return fmt.Sprintf("listener %s: %s at %d, want after %s (%d) and before the router (%d)", h.listener, headerToMetadataFilter, i, apiKeyAuthFilter, auth, router)
		}
		rules, _ := h.filter(headerToMetadataFilter)["request_rules"].([]any)
		if !slices.ContainsFunc(rules, func(r any) bool {
			rm := r.(map[string]any)
			ns, _, _ := unstructured.NestedString(rm, "on_header_present", "metadata_namespace")
			key, _, _ := unstructured.NestedString(rm, "on_header_present", "key")
			return rm["header"] == names.CallerHeader && ns == "io.envoy.ai_gateway" && key == gateway.CallerMetadataKey
		}) {
			return fmt.Sprintf("listener %s: %s does not copy %s into io.envoy.ai_gateway:%s: %v", h.listener, headerToMetadataFilter, names.CallerHeader, gateway.CallerMetadataKey, rules)
		}
	}
	return ""
}

// collect appends every object found under key, at any depth of v.
func collect(v any, key string, into *[]map[string]any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if m, ok := e.(map[string]any); ok && k == key {
				*into = append(*into, m)
				continue
			}
			collect(e, key, into)
		}
	case []any:
		for _, e := range x {
			collect(e, key, into)
		}
	}
}

// checkNoCallerAuth: an open gateway checks no key on any model route.
func checkNoCallerAuth(d xdsDump) string {
	rs := d.modelRoutes()
	if len(rs) == 0 {
		return "no model route yet"
	}
	for _, r := range rs {
		if pf := perFilter(r, apiKeyAuthFilter); pf != nil {
			return fmt.Sprintf("route %v of an open gateway checks API keys: %v", r["name"], pf)
		}
	}
	return ""
}

// checkCallerAuth: with spec.auth, every model route enables api_key_auth
// with one credential per caller (keys redacted), the keys looked for in
// Authorization and x-api-key, the client ID forwarded in
// x-modelplane-caller and the key hidden from the backend (gateway v1.8.3
// internal/xds/translator/api_key_auth.go); /healthz checks no key.
func checkCallerAuth(clients []string) func(xdsDump) string {
	want := slices.Sorted(slices.Values(clients))
	return func(d xdsDump) string {
		for _, h := range d.hcms() {
			// Only a listener with model routes needs the filter: with
			// TLS, the http listener serves /healthz and the redirect.
			rc, _, _ := unstructured.NestedString(h.config, "rds", "route_config_name")
			if h.filterIndex(apiKeyAuthFilter) < 0 && d.servesModels(rc) {
				return fmt.Sprintf("listener %s: no %s filter", h.listener, apiKeyAuthFilter)
			}
		}
		rs := d.modelRoutes()
		if len(rs) == 0 {
			return "no model route yet"
		}
		for _, r := range rs {
			pf := perFilter(r, apiKeyAuthFilter)
			if pf == nil {
				return fmt.Sprintf("route %v: no %s config", r["name"], apiKeyAuthFilter)
			}
			var got []string
			creds, _ := pf["credentials"].([]any)
			for _, c := range creds {
				cm := c.(map[string]any)
				if cm["key"] != "<redacted>" {
					return fmt.Sprintf("route %v: a credential's key is not redacted", r["name"])
				}
				got = append(got, fmt.Sprint(cm["client"]))
			}
			if slices.Sort(got); !slices.Equal(got, want) {
				return fmt.Sprintf("route %v: credentials for clients %v, want %v", r["name"], got, want)
			}
			var sources []string
			ks, _ := pf["key_sources"].([]any)
			for _, k := range ks {
				sources = append(sources, fmt.Sprint(k.(map[string]any)["header"]))
			}
			if !slices.Equal(sources, []string{"authorization", "x-api-key"}) {
				return fmt.Sprintf("route %v: key sources %v, want the headers authorization and x-api-key", r["name"], ks)
			}
			fw, _ := pf["forwarding"].(map[string]any)
			if fw["header"] != names.CallerHeader || fw["hide_credentials"] != true {
				return fmt.Sprintf("route %v: forwarding %v, want the client ID in %s and the key hidden", r["name"], fw, names.CallerHeader)
			}
		}
		for _, r := range d.routes() {
			if p, _, _ := unstructured.NestedString(r, "match", "path"); p == "/healthz" && perFilter(r, apiKeyAuthFilter) != nil {
				return fmt.Sprintf("route %v: /healthz checks API keys", r["name"])
			}
		}
		return ""
	}
}
