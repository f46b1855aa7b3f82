package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	aigv1b1 "github.com/envoyproxy/ai-gateway/api/v1beta1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// budgetDomains are the two domains our Gateway's rate-limit filters ask
// the rate-limit service in: the listener's, for the per-model budget, and
// the policy's, for the all-models budget, whose counters every route
// shares (gateway v1.8.3 internal/xds/translator/ratelimit.go,
// buildRateLimitFilter).
type budgetDomains struct {
	listener string
	shared   string
}

// budgetDomainsOf reads the two domains from the first HTTP connection
// manager that has rate-limit filters (checkBudgets has checked them).
func budgetDomainsOf(d xdsDump) budgetDomains {
	var out budgetDomains
	for _, h := range d.hcms() {
		fs, _ := h.config["http_filters"].([]any)
		for _, f := range fs {
			fm, _ := f.(map[string]any)
			n, _ := fm["name"].(string)
			dom, _, _ := unstructured.NestedString(fm, "typed_config", "domain")
			switch {
			case n == rateLimitFilter:
				out.listener = dom
			case strings.HasPrefix(n, rateLimitFilter+"/"):
				out.shared = dom
			}
		}
		if out.listener != "" {
			return out
		}
	}
	return out
}

// actions are a rate limit's actions.
func actions(rl any) []map[string]any {
	as, _ := rl.(map[string]any)["actions"].([]any)
	out := make([]map[string]any, 0, len(as))
	for _, a := range as {
		out = append(out, a.(map[string]any))
	}
	return out
}

// genericKey is the descriptor value of a rate limit's first generic_key
// action: what Envoy Gateway keys a rule's counter on.
func genericKey(rl any) string {
	for _, a := range actions(rl) {
		if v, ok, _ := unstructured.NestedString(a, "generic_key", "descriptor_value"); ok {
			return v
		}
	}
	return ""
}

// perFilterConfigs are a route's per-filter configs by filter name.
func perFilterConfigs(r map[string]any) map[string]any {
	m, _ := r["typed_per_filter_config"].(map[string]any)
	return m
}

// readRateLimitConfig reads what Envoy Gateway serves the rate-limit
// service on its port 18001, as that service does (node envoy-ratelimit,
// mutual TLS with certgen's envoy-rate-limit certificate in certs), until
// check passes, and writes it to $CONTROLPLANE_XDS/<name>.json when that
// is set.
func (sc *scenarios) readRateLimitConfig(t *testing.T, certs, name string, check func([]map[string]any) string) {
	t.Helper()
	var raw []byte
	sc.eventually(t, waitSettle, "the rate-limit service's configuration: "+name, func(ctx context.Context) string {
		rctx, cancel := context.WithTimeout(ctx, 25*time.Second)
		defer cancel()
		var stderr bytes.Buffer
		cmd := exec.CommandContext(rctx, sc.c.Bins[harness.ToolXDSReader.Name], "-ratelimit-config",
			"-address", fmt.Sprintf("127.0.0.1:%d", harness.RateLimitXDSPort), "-cert-dir", certs,
			"-node-id", rateLimitNodeID, "-timeout", "15s")
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Sprintf("the reader failed: %v: %s", err, strings.TrimSpace(stderr.String()))
		}
		var got struct {
			Configs []map[string]any `json:"ratelimit_configs"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			return fmt.Sprintf("cannot decode the reader's output: %v", err)
		}
		raw = out
		return check(got.Configs)
	})
	if dir := os.Getenv("CONTROLPLANE_XDS"); dir != "" {
		harness.Must(t, os.MkdirAll(dir, 0o755))
		harness.WriteFile(t, filepath.Join(dir, name+".json"), raw)
	}
}

// checkRateLimitConfig: the rate-limit service is given, in each domain
// the xDS names, a limit at the descriptor path of every rate limit of
// every model route, the path Envoy's descriptors for that rate limit
// follow down its configuration (configPath), and the limit is the
// budget's: the per-model default an hour, the ci caller's own an hour,
// the all-models budget a day.
func checkRateLimitConfig(d xdsDump) func([]map[string]any) string {
	return func(cfgs []map[string]any) string {
		limits := map[string]map[string]string{}
		for _, c := range cfgs {
			dom, _ := c["domain"].(string)
			if limits[dom] == nil {
				limits[dom] = map[string]string{}
			}
			collectLimits(c["descriptors"], nil, func(path []string, unit string, n int64) {
				limits[dom][strings.Join(path, ".")] = fmt.Sprintf("%d/%s", n, unit)
			})
		}
		rs := d.modelRoutes()
		if len(rs) == 0 {
			return "no model route in the xDS"
		}
		checked := 0
		for _, r := range rs {
			for f, v := range perFilterConfigs(r) {
				if !strings.HasPrefix(f, rateLimitFilter) {
					continue
				}
				pf, _ := v.(map[string]any)
				dom, _ := pf["domain"].(string)
				rls, _ := pf["rate_limits"].([]any)
				for _, rl := range rls {
					if rl.(map[string]any)["apply_on_stream_done"] == true {
						continue // the same actions, so the same path, as its request check
					}
					path, want := configPath(rl), expectedLimit(f, rl)
					if got := limits[dom][path]; got != want {
						return fmt.Sprintf("domain %q: the limit at %s is %q, want %s (limits there: %v)", dom, path, got, want, limits[dom])
					}
					checked++
				}
			}
		}
		if checked == 0 {
			return "no rate limit on any model route"
		}
		return ""
	}
}

// configPath is the path of key[=value] that Envoy's descriptor for a rate
// limit follows down the rate-limit service's configuration: a generic key
// and a header value match by key and value, a request header by its key
// alone, whatever the header's value (envoyproxy/ratelimit
// src/config/config_impl.go, GetLimit).
func configPath(rl any) string {
	var parts []string
	for _, a := range actions(rl) {
		for _, kind := range []string{"generic_key", "header_value_match"} {
			if m, ok := a[kind].(map[string]any); ok {
				parts = append(parts, fmt.Sprint(m["descriptor_key"])+"="+fmt.Sprint(m["descriptor_value"]))
			}
		}
		if m, ok := a["request_headers"].(map[string]any); ok {
			parts = append(parts, fmt.Sprint(m["descriptor_key"]))
		}
	}
	return strings.Join(parts, ".")
}

// expectedLimit is the scenario's budget a rate limit of filter carries:
// the all-models budget in the shared filter; in the per-model one, the
// default (keyed on the caller header) or the ci caller's own.
func expectedLimit(filter string, rl any) string {
	if filter != rateLimitFilter {
		return fmt.Sprintf("%d/DAY", budgetAllModels)
	}
	for _, a := range actions(rl) {
		if a["request_headers"] != nil {
			return fmt.Sprintf("%d/HOUR", budgetPerModel)
		}
	}
	return fmt.Sprintf("%d/HOUR", budgetCI)
}

// collectLimits walks a descriptor tree and calls found for each limit
// with the path of key[=value] that leads to it.
func collectLimits(v any, path []string, found func(path []string, unit string, n int64)) {
	ds, _ := v.([]any)
	for _, d := range ds {
		dm, _ := d.(map[string]any)
		k, _ := dm["key"].(string)
		if val, _ := dm["value"].(string); val != "" {
			k += "=" + val
		}
		p := append(slices.Clone(path), k)
		if l, ok := dm["rate_limit"].(map[string]any); ok {
			unit, _ := l["unit"].(string)
			n, _ := strconv.ParseInt(fmt.Sprint(l["requests_per_unit"]), 10, 64)
			found(p, unit, n)
		}
		collectLimits(dm["descriptors"], p, found)
	}
}

// rateLimitService is a running envoyproxy/ratelimit.
type rateLimitService struct {
	grpc, debug string // host:port
}

// startRateLimit runs the rate-limit service as Envoy Gateway's
// envoy-ratelimit Deployment does (ratelimit/resource.go: its
// environment), with the certificate in certs, on loopback ports of its
// own, with the Redis at redisAddr and its configuration from Envoy
// Gateway's port 18001.
func (sc *scenarios) startRateLimit(t *testing.T, certs, redisAddr string) *rateLimitService {
	t.Helper()
	runtime := filepath.Join(sc.c.Dir, "ratelimit-runtime")
	harness.Must(t, os.MkdirAll(filepath.Join(runtime, "ratelimit"), 0o755))
	ps := sc.c.Procs
	rl := &rateLimitService{
		grpc:  "127.0.0.1:" + strconv.Itoa(ps.FreePort()),
		debug: "127.0.0.1:" + strconv.Itoa(ps.FreePort()),
	}
	grpcPort, debugPort := strings.TrimPrefix(rl.grpc, "127.0.0.1:"), strings.TrimPrefix(rl.debug, "127.0.0.1:")
	p := ps.Start("ratelimit", []string{
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(ps.FreePort()),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + grpcPort,
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + debugPort,
		"RUNTIME_ROOT=" + runtime, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_IGNOREDOTFILES=true", "RUNTIME_WATCH_ROOT=false",
		"LOG_LEVEL=info", "USE_STATSD=false",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + redisAddr,
		"CONFIG_TYPE=GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_NODE_ID=" + rateLimitNodeID,
		"CONFIG_GRPC_XDS_SERVER_URL=127.0.0.1:" + strconv.Itoa(harness.RateLimitXDSPort),
		"CONFIG_GRPC_XDS_SERVER_USE_TLS=true",
		"CONFIG_GRPC_XDS_CLIENT_TLS_CERT=" + filepath.Join(certs, "tls.crt"),
		"CONFIG_GRPC_XDS_CLIENT_TLS_KEY=" + filepath.Join(certs, "tls.key"),
		"CONFIG_GRPC_XDS_SERVER_TLS_CACERT=" + filepath.Join(certs, "ca.crt"),
		// In a cluster it dials Envoy Gateway's Service by name; here the
		// loopback, so the name to verify is set (certgen's server
		// certificate names envoy-gateway).
		"CONFIG_GRPC_XDS_SERVER_TLS_SAN=envoy-gateway",
		"GRPC_SERVER_USE_TLS=true",
		"GRPC_SERVER_TLS_CERT=" + filepath.Join(certs, "tls.crt"),
		"GRPC_SERVER_TLS_KEY=" + filepath.Join(certs, "tls.key"),
		"GRPC_SERVER_TLS_CA_CERT=" + filepath.Join(certs, "ca.crt"),
		"FORCE_START_WITHOUT_INITIAL_CONFIG=true",
	}, sc.c.Bins[harness.ToolRateLimit.Name])
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	return rl
}

// holds returns "" once the service has loaded limits for both domains.
func (rl *rateLimitService) holds(ctx context.Context, doms budgetDomains) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+rl.debug+"/rlconfig", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, dom := range []string{doms.listener, doms.shared} {
		if !strings.Contains(string(b), dom+".") {
			return fmt.Sprintf("no limits of domain %q loaded yet: %q", dom, string(b))
		}
	}
	return ""
}

// envoyDescriptors are the descriptors Envoy's rate-limit filter sends for
// a route's rate limits and one request: only the rate limits of the phase
// (apply_on_stream_done for a finished response, the others for the
// request), each one descriptor with an entry per action, and none when
// an action cannot append its entry; hits_addend is a number, or AI
// Gateway's metadata named by its format. The semantics are Envoy's API
// at the version Envoy Gateway v1.8.3 pins (go-control-plane/envoy
// config/route/v3/route_components.pb.go: RateLimit.actions, hits_addend
// and apply_on_stream_done, RequestHeaders.skip_if_absent,
// HeaderValueMatch.expect_match, RateLimit_HitsAddend.format). Envoy
// Gateway generates only generic_key, request_headers and
// header_value_match actions for budgets (internal/xds/translator/
// ratelimit.go, buildRouteRateLimits); any other fails.
func envoyDescriptors(rls []any, headers map[string]string, tokens map[string]uint64, done bool) ([]map[string]any, error) {
	var out []map[string]any
	for _, rl := range rls {
		m, _ := rl.(map[string]any)
		if (m["apply_on_stream_done"] == true) != done {
			continue
		}
		entries, ok, err := descriptorEntries(actions(rl), headers)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		d := map[string]any{"entries": entries}
		if ha, ok := m["hits_addend"].(map[string]any); ok {
			if d["hits_addend"], err = hitsAddend(ha, tokens); err != nil {
				return nil, err
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// descriptorEntries are the entries a rate limit's actions append for a
// request with headers; false when one of them cannot append its entry,
// so that no descriptor is sent.
func descriptorEntries(as []map[string]any, headers map[string]string) ([]map[string]any, bool, error) {
	entry := func(k any, fallback string, v any) map[string]any {
		if k == nil || k == "" {
			k = fallback
		}
		return map[string]any{"key": k, "value": v}
	}
	var entries []map[string]any
	for _, a := range as {
		switch {
		case a["generic_key"] != nil:
			g := a["generic_key"].(map[string]any)
			entries = append(entries, entry(g["descriptor_key"], "generic_key", g["descriptor_value"]))
		case a["request_headers"] != nil:
			h := a["request_headers"].(map[string]any)
			v, present := headers[fmt.Sprint(h["header_name"])]
			if present {
				entries = append(entries, entry(h["descriptor_key"], "", v))
			} else if h["skip_if_absent"] != true {
				return nil, false, nil
			}
		case a["header_value_match"] != nil:
			h := a["header_value_match"].(map[string]any)
			matched, err := headersMatch(h["headers"], headers)
			if err != nil {
				return nil, false, err
			}
			if matched != (h["expect_match"] != false) {
				return nil, false, nil
			}
			entries = append(entries, entry(h["descriptor_key"], "header_match", h["descriptor_value"]))
		default:
			return nil, false, fmt.Errorf("an action the budgets do not use: %v", a)
		}
	}
	return entries, true, nil
}

// headersMatch reports whether every header matcher matches: only the
// exact string matches Envoy Gateway writes for a budget's callers.
func headersMatch(matchers any, headers map[string]string) (bool, error) {
	ms, _ := matchers.([]any)
	for _, x := range ms {
		hm := x.(map[string]any)
		exact, ok, _ := unstructured.NestedString(hm, "string_match", "exact")
		if !ok {
			return false, fmt.Errorf("a header matcher other than an exact string: %v", hm)
		}
		v, present := headers[fmt.Sprint(hm["name"])]
		if (present && v == exact) == (hm["invert_match"] == true) {
			return false, nil
		}
	}
	return true, nil
}

// hitsAddend is a rate limit's hits_addend for one response: its number,
// or the token count its format names in AI Gateway's metadata.
func hitsAddend(ha map[string]any, tokens map[string]uint64) (any, error) {
	if n, ok := ha["number"]; ok {
		return n, nil
	}
	f := fmt.Sprint(ha["format"])
	key := strings.TrimSuffix(strings.TrimPrefix(f, "%DYNAMIC_METADATA("+aigv1b1.AIGatewayFilterMetadataNamespace+":"), ")%")
	n, ok := tokens[key]
	if !ok || key == f {
		return nil, fmt.Errorf("hits_addend %q names no token count AI Gateway writes", f)
	}
	return strconv.FormatUint(n, 10), nil
}
