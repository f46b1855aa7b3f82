package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	aigv1b1 "github.com/envoyproxy/ai-gateway/api/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/gatewayready"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// Token budgets (spec.budgets) down to the rate-limit service. No Envoy
// runs here, so the suite plays Envoy's part: it reads the rate limits
// Envoy Gateway gives our Gateway's Envoy, turns them into the descriptors
// Envoy's rate-limit filter would send for a request and for its finished
// response, and sends them to the real envoyproxy/ratelimit, which reads
// its limits from Envoy Gateway as in a cluster and counts in a Redis.

const (
	// rateLimitNodeID is the node the rate-limit service asks as, and the
	// key of Envoy Gateway's snapshot for it (InfraName there).
	rateLimitNodeID = "envoy-ratelimit"

	rateLimitFilter  = "envoy.filters.http.ratelimit"
	rateLimitCluster = "ratelimit_cluster"

	// The scenario's budgets: each caller may spend budgetPerModel total
	// tokens an hour on each model, the ci caller budgetCI instead; and
	// budgetAllModels output tokens a day across all models.
	budgetPerModel  = 100
	budgetCI        = 1000
	budgetAllModels = 500
	ciCaller        = "ci-pipeline"
)

// tokenBudgets is scenario 5c2. With caller auth on, the platform sets
// token budgets. Envoy Gateway as the suite started it has no rate-limit
// backend, so it refuses the BackendTrafficPolicy: GatewayReady must say
// TrafficPolicyNotAccepted in Envoy Gateway's words, and the model route
// follow it down. Envoy Gateway restarted with a Redis accepts it; then
// our Gateway's xDS must carry the rate-limit filters after caller auth,
// each model route's rate limits keyed on the caller header and charged
// the response's tokens when the stream is done, and the all-models
// budget in a shared domain; the rate-limit service's own configuration
// must hold the limits; and the real rate-limit service, fed by Envoy
// Gateway and asked as Envoy would ask, must stop one caller at its budget
// while another goes on. Finally budgets and caller auth go again.
func (sc *scenarios) tokenBudgets(t *testing.T) {
	c, w := sc.c, sc.w
	key := w.CallerKeys("sk-budget-")
	callers := map[string]any{"alice": key("alice"), "bob": key("bob"), ciCaller: key(ciCaller)}
	copyName := names.CallerSecret(harness.GatewayXRName, callersSecret)
	sc.putCallers(t, callersSecret, callers)
	sc.patchGateway(t, `{"spec":{"auth":{"method":"APIKey","apiKey":{"secretSelector":{"matchLabels":{"`+callersLabel+`":"`+callersLabelTrue+`"}}}},"budgets":`+budgetsJSON()+`}}`)

	// Without a rate-limit backend Envoy Gateway refuses the policy
	// (gateway v1.8.3 internal/gatewayapi/backendtrafficpolicy.go,
	// buildGlobalRateLimit), and every route it covers would answer 500.
	sc.gatewayFalse(t, "budgets without a rate-limit backend", gatewayready.ReasonTrafficPolicyNotAccepted, "enable Ratelimit in the EnvoyGateway config")
	sc.eventually(t, waitRoute, "RoutingReady=False while the gateway's traffic policy is refused", func(ctx context.Context) string {
		return wantCondition(sc.routeXR(ctx), "RoutingReady", "False")
	})

	// Envoy Gateway with a rate-limit backend. It never dials Redis itself
	// (it only passes the URL to the envoy-ratelimit Deployment,
	// ratelimit/resource.go, REDIS_URL); the rate-limit service below does.
	redis := miniredis.NewMiniRedis()
	harness.Must(t, redis.Start())
	t.Cleanup(redis.Close)
	since := time.Now()
	// By name: Envoy Gateway v1.8.3 refuses its own configuration with a
	// URL that begins with an IP ("unknown ratelimit redis url format",
	// api/v1alpha1/validation/envoygateway_validate.go: each URL must pass
	// url.Parse, whose scheme cannot begin with a digit).
	redisURL := "localhost:" + redis.Port()
	c.RestartEnvoyGatewayWithRateLimit(sc.ctx, sc.s.Up, redisURL)
	sc.eventually(t, waitRoute, "GatewayReady=True with the budgets accepted", func(ctx context.Context) string {
		if s := sc.gatewayAuthReady(ctx, []string{copyName}, 3); s != "" {
			return s
		}
		return sc.trafficPolicyAccepted(ctx)
	})
	t.Logf("budgets in force %s after Envoy Gateway was restarted with rate limiting", time.Since(since).Round(time.Millisecond))
	sc.eventually(t, waitRoute, "RoutingReady=True with budgets", func(ctx context.Context) string {
		return wantCondition(sc.routeXR(ctx), "RoutingReady", "True")
	})

	// What Envoy is told.
	d := sc.readXDS(t, "scenario-budgets", all(checkCallerAuth([]string{"alice", "bob", ciCaller}), checkBudgets))
	// What the rate-limit service is told.
	domains := budgetDomainsOf(d)
	// certgen's certificate for the rate-limit service, which Envoy
	// Gateway's envoy-ratelimit Deployment mounts (ratelimit/resource.go):
	// its client certificate to port 18001 and its server certificate.
	rlCerts := c.WriteCertgenSecret(sc.ctx, "envoy-rate-limit", filepath.Join(c.Dir, "envoy-rate-limit-certs"))
	sc.readRateLimitConfig(t, rlCerts, "scenario-budgets-ratelimit", checkRateLimitConfig(d))

	// The rate-limit service itself, asked as Envoy would ask.
	rl := sc.startRateLimit(t, rlCerts, redisURL)
	sc.eventually(t, waitSettle, "the rate-limit service's configuration from Envoy Gateway", func(ctx context.Context) string {
		return rl.holds(ctx, domains)
	})
	sc.spendBudgets(t, rl, d)
	sc.noSecretsInObjects(t, "with budgets")

	// Budgets and caller auth off again, as the scenarios after this one
	// expect; Envoy Gateway keeps rate limiting enabled, as a platform
	// that uses budgets runs it.
	sc.authAndBudgetsOff(t, copyName)
	sc.noDeletions(t)
	w.Check(t)
}

// authAndBudgetsOff turns caller auth and budgets off, deletes the
// callers' Secret, and returns once the gateway is open again, the route
// RoutingReady and Envoy told to check no key and limit nothing.
func (sc *scenarios) authAndBudgetsOff(t *testing.T, copyName string) {
	t.Helper()
	c, w := sc.c, sc.w
	w.Allow(harness.Allowance{Reason: "spec.auth removed: the caller-auth policy goes", Resource: "securitypolicies", Namespace: harness.GatewayNS, Name: names.CallerPolicy(harness.GatewayXRName)})
	w.Allow(harness.Allowance{Reason: "spec.auth removed: the callers' copy goes", Resource: "secrets", Namespace: harness.GatewayNS, Name: copyName})
	for _, r := range []string{gateway.ResourceCallerAuth, gateway.PrefixCallerSecret + callersSecret} {
		if o := sc.composedObject(sc.ctx, harness.ObjectNS, harness.GatewayXRName, r); o != nil {
			w.Allow(harness.Allowance{Reason: "spec.auth removed: " + r + "'s Object goes", Resource: "objects", Namespace: harness.ObjectNS, Name: o.GetName()})
		}
	}
	sc.patchGateway(t, `{"spec":{"auth":null,"budgets":null}}`)
	sc.eventually(t, waitRoute, "GatewayReady=True, the gateway open and without budgets", func(ctx context.Context) string {
		gw := sc.gatewayXR(ctx)
		if s := wantCondition(gw, gateway.ConditionType, "True"); s != "" {
			return s
		}
		if _, err := sc.get(ctx, harness.GVREGSecurityPolicy, harness.GatewayNS, names.CallerPolicy(harness.GatewayXRName)); err == nil {
			return "the caller-auth SecurityPolicy is still there"
		}
		p, err := sc.get(ctx, harness.GVRTrafficPolicy, harness.GatewayNS, names.FailoverPolicy(harness.GatewayXRName))
		if err != nil {
			return err.Error()
		}
		if rl, ok, _ := unstructured.NestedMap(p.Object, "spec", "rateLimit"); ok {
			return fmt.Sprintf("the BackendTrafficPolicy still limits: %v", rl)
		}
		return sc.trafficPolicyAccepted(ctx)
	})
	w.Allow(harness.Allowance{Reason: "caller auth off: its callers' Secret is deleted", Resource: "secrets", Namespace: harness.ObjectNS, Name: callersSecret})
	harness.Must(t, c.Dyn.Resource(harness.GVRSecret).Namespace(harness.ObjectNS).Delete(sc.ctx, callersSecret, metav1.DeleteOptions{}))
	sc.eventually(t, waitRoute, "RoutingReady=True", func(ctx context.Context) string {
		return wantCondition(sc.routeXR(ctx), "RoutingReady", "True")
	})
	sc.readXDS(t, "scenario-budgets-off", all(checkNoCallerAuth, checkNoBudgets))
}

// trafficPolicyAccepted returns "" once Envoy Gateway has accepted the
// gateway's BackendTrafficPolicy at its current generation.
func (sc *scenarios) trafficPolicyAccepted(ctx context.Context) string {
	p, err := sc.get(ctx, harness.GVRTrafficPolicy, harness.GatewayNS, names.FailoverPolicy(harness.GatewayXRName))
	if err != nil {
		return err.Error()
	}
	return acceptedNow(p, "BackendTrafficPolicy")
}

// tokenCost is the hits_addend Envoy Gateway gives a rule charged the
// response's tokens: AI Gateway's dynamic metadata under key (gateway
// v1.8.3 internal/gatewayapi/backendtrafficpolicy.go, the response cost's
// Format).
func tokenCost(key string) string {
	return "%DYNAMIC_METADATA(" + aigv1b1.AIGatewayFilterMetadataNamespace + ":" + key + ")%"
}

// checkBudgets: every HTTP connection manager that serves models has a
// rate-limit filter for the listener's domain and one for the shared
// domain, both after caller auth (which sets the caller header they read)
// and both asking the rate-limit cluster. Every model route has, for the
// per-model budget, a request check costing 0 and a response charge of
// the total tokens once the stream is done, for the caller's own counter
// (the caller header, Distinct) on the default limit and for the ci
// caller on its own, keyed on the route; and, for the all-models budget,
// the same pair charging output tokens under one key that does not name
// the route: the shared bucket.
func checkBudgets(d xdsDump) string {
	served := 0
	for _, h := range d.hcms() {
		rc, _, _ := unstructured.NestedString(h.config, "rds", "route_config_name")
		if !d.servesModels(rc) {
			continue
		}
		served++
		auth, base := h.filterIndex(apiKeyAuthFilter), h.filterIndex(rateLimitFilter)
		fs, _ := h.config["http_filters"].([]any)
		shared := slices.IndexFunc(fs, func(f any) bool {
			n, _ := f.(map[string]any)["name"].(string)
			return strings.HasPrefix(n, rateLimitFilter+"/")
		})
		if base < 0 || shared < 0 {
			return fmt.Sprintf("listener %s: rate-limit filters at %d (per model) and %d (shared), want both", h.listener, base, shared)
		}
		if auth < 0 || base < auth || shared < auth {
			return fmt.Sprintf("listener %s: caller auth at %d and the rate-limit filters at %d and %d: they must run after it, which sets the caller header", h.listener, auth, base, shared)
		}
		for _, i := range []int{base, shared} {
			tc, _ := fs[i].(map[string]any)["typed_config"].(map[string]any)
			if cl, _, _ := unstructured.NestedString(tc, "rate_limit_service", "grpc_service", "envoy_grpc", "cluster_name"); cl != rateLimitCluster {
				return fmt.Sprintf("listener %s: filter %v asks cluster %q, want %s", h.listener, fs[i].(map[string]any)["name"], cl, rateLimitCluster)
			}
		}
	}
	if served == 0 {
		return "no listener serves models yet"
	}
	if d.cluster(rateLimitCluster) == nil {
		return "no " + rateLimitCluster + " cluster"
	}
	doms := budgetDomainsOf(d)
	rs := d.modelRoutes()
	if len(rs) == 0 {
		return "no model route yet"
	}
	sharedKeys := map[string]bool{}
	for _, r := range rs {
		name, _ := r["name"].(string)
		own := perFilter(r, rateLimitFilter)
		if dom, _ := own["domain"].(string); dom != doms.listener {
			return fmt.Sprintf("route %s: per-model rate limits in domain %q, want the listener's %q", name, dom, doms.listener)
		}
		rls, _ := own["rate_limits"].([]any)
		if msg := checkBudgetPairs(name, rls, names.TotalTokensKey, 2); msg != "" {
			return msg
		}
		for _, rl := range rls {
			if k := genericKey(rl); k != name {
				return fmt.Sprintf("route %s: a per-model rate limit keyed %q, not on the route", name, k)
			}
		}
		var caller, ciOnly, notCI bool
		for _, rl := range rls {
			for _, a := range actions(rl) {
				if h, _, _ := unstructured.NestedString(a, "request_headers", "header_name"); h == names.CallerHeader {
					caller = true
				}
				if hv, ok := a["header_value_match"].(map[string]any); ok {
					var exact string
					if hs, _ := hv["headers"].([]any); len(hs) == 1 {
						exact, _, _ = unstructured.NestedString(hs[0].(map[string]any), "string_match", "exact")
					}
					if exact == ciCaller {
						if hv["expect_match"] == false {
							notCI = true
						} else {
							ciOnly = true
						}
					}
				}
			}
		}
		if !caller || !ciOnly || !notCI {
			return fmt.Sprintf("route %s: per-model rate limits keyed on the caller header %t, for %s alone %t, leaving %s out of the default %t; want all", name, caller, ciCaller, ciOnly, ciCaller, notCI)
		}
		var sharedRLs []any
		for k, v := range perFilterConfigs(r) {
			if strings.HasPrefix(k, rateLimitFilter+"/") {
				if dom, _ := v.(map[string]any)["domain"].(string); dom != doms.shared {
					return fmt.Sprintf("route %s: %s in domain %q, want %q", name, k, dom, doms.shared)
				}
				sharedRLs, _ = v.(map[string]any)["rate_limits"].([]any)
			}
		}
		if msg := checkBudgetPairs(name, sharedRLs, names.OutputTokensKey, 1); msg != "" {
			return msg
		}
		for _, rl := range sharedRLs {
			k := genericKey(rl)
			if k == name || k == "" {
				return fmt.Sprintf("route %s: the all-models rate limit is keyed %q, on the route", name, k)
			}
			sharedKeys[k] = true
		}
	}
	if len(sharedKeys) != 1 {
		return fmt.Sprintf("the all-models budget has keys %v across the model routes, want one shared key", slices.Sorted(maps.Keys(sharedKeys)))
	}
	return ""
}

// checkBudgetPairs: rls are rules request check/response charge pairs: each
// rule once with hits_addend 0 on the request, and once with the response's
// tokens under key when the stream is done.
func checkBudgetPairs(route string, rls []any, key string, rules int) string {
	var checks, charges int
	for _, rl := range rls {
		m, _ := rl.(map[string]any)
		if m["apply_on_stream_done"] == true {
			if f, _, _ := unstructured.NestedString(m, "hits_addend", "format"); f != tokenCost(key) {
				return fmt.Sprintf("route %s: a rate limit applied when the stream is done charges %v, want %s", route, m["hits_addend"], tokenCost(key))
			}
			charges++
			continue
		}
		if n, _, _ := unstructured.NestedFieldNoCopy(m, "hits_addend", "number"); fmt.Sprint(n) != "0" {
			return fmt.Sprintf("route %s: a request-time rate limit costs %v, want 0 (only a check)", route, m["hits_addend"])
		}
		checks++
	}
	if checks != rules || charges != rules {
		return fmt.Sprintf("route %s: %d request checks and %d response charges of %s, want %d of each", route, checks, charges, key, rules)
	}
	return ""
}

// checkNoBudgets: no route has rate limits once spec.budgets is gone.
func checkNoBudgets(d xdsDump) string {
	for _, r := range d.routes() {
		for k := range perFilterConfigs(r) {
			if strings.HasPrefix(k, rateLimitFilter) {
				return fmt.Sprintf("route %v still has %s", r["name"], k)
			}
		}
	}
	return ""
}

// spendStep is one event Envoy's rate-limit filters act on: a caller's
// request, or its response once the stream is done, on a route. Each of
// the route's two rate-limit filters then asks the service in its own
// domain; model and all are the answers wanted from the per-model and the
// all-models domain.
type spendStep struct {
	what       string
	route      map[string]any
	caller     string
	done       bool              // the response, once the stream is done
	tokens     map[string]uint64 // AI Gateway's metadata: the response's token counts
	model, all string            // OK or OVER_LIMIT
}

// spendBudgets plays Envoy for three callers against the rate-limit
// service and checks each answer: alice spends her per-model budget and is
// refused on that model, bob is not; the ci caller, on a limit of its own,
// spends past the default limit; bob spends his all-models budget and is
// refused across models, the others are not.
func (sc *scenarios) spendBudgets(t *testing.T, rl *rateLimitService, d xdsDump) {
	t.Helper()
	rs := d.modelRoutes()
	r0 := rs[0]
	shared := ""
	for k := range perFilterConfigs(r0) {
		if strings.HasPrefix(k, rateLimitFilter+"/") {
			shared = k
		}
	}
	// The all-models budget is spent on r0 and checked on r1: another
	// model route when there is one. Either way its descriptor names no
	// route (checkBudgets), so the counter is the caller's on every route.
	r1 := rs[len(rs)-1]
	other := fmt.Sprintf("model route %v", r1["name"])
	if len(rs) == 1 {
		other = "the same model route (the only one)"
	}
	t.Logf("playing Envoy on %d model routes, %v first", len(rs), r0["name"])
	tok := func(total, output uint64) map[string]uint64 {
		return map[string]uint64{names.TotalTokensKey: total, names.OutputTokensKey: output}
	}
	const ok, over = "OK", "OVER_LIMIT"
	steps := []spendStep{
		{what: "alice asks", route: r0, caller: "alice", model: ok, all: ok},
		{what: "alice's answer: 60 tokens, 30 output", route: r0, caller: "alice", done: true, tokens: tok(60, 30), model: ok, all: ok},
		{what: "alice's next answer: 60 more, past her 100 on this model (it was served: it is charged after)", route: r0, caller: "alice", done: true, tokens: tok(60, 30), model: over, all: ok},
		{what: "alice asks again", route: r0, caller: "alice", model: over, all: ok},
		{what: "bob asks", route: r0, caller: "bob", model: ok, all: ok},
		{what: ciCaller + " asks", route: r0, caller: ciCaller, model: ok, all: ok},
		{what: ciCaller + "'s answer: 150 tokens, past the default 100, within its own 1000", route: r0, caller: ciCaller, done: true, tokens: tok(150, 10), model: ok, all: ok},
		{what: ciCaller + " asks again", route: r0, caller: ciCaller, model: ok, all: ok},
		{what: "bob's answer: 90 tokens, 480 output", route: r0, caller: "bob", done: true, tokens: tok(90, 480), model: ok, all: ok},
		{what: "bob's next answer: 5 tokens, 40 output, past his 500 across all models", route: r0, caller: "bob", done: true, tokens: tok(5, 40), model: ok, all: over},
		{what: "bob asks on " + other, route: r1, caller: "bob", model: ok, all: over},
		{what: ciCaller + " asks on " + other, route: r1, caller: ciCaller, model: ok, all: ok},
	}
	type call struct {
		step   int
		domain string
		want   string
	}
	var calls []call
	var reqs []json.RawMessage
	for i, s := range steps {
		for _, f := range []struct{ filter, want string }{{rateLimitFilter, s.model}, {shared, s.all}} {
			pf := perFilter(s.route, f.filter)
			rls, _ := pf["rate_limits"].([]any)
			ds, err := envoyDescriptors(rls, map[string]string{names.CallerHeader: s.caller}, s.tokens, s.done)
			if err != nil {
				t.Fatalf("%s: %v", s.what, err)
			}
			if len(ds) == 0 {
				t.Fatalf("%s: route %v's %s rate limits give no descriptor", s.what, s.route["name"], f.filter)
			}
			b, err := json.Marshal(map[string]any{"domain": pf["domain"], "descriptors": ds})
			harness.Must(t, err)
			reqs = append(reqs, b)
			calls = append(calls, call{step: i, domain: fmt.Sprint(pf["domain"]), want: f.want})
		}
	}
	in, err := json.Marshal(reqs)
	harness.Must(t, err)
	ctx, cancel := context.WithTimeout(sc.ctx, time.Minute)
	defer cancel()
	// Envoy reaches the rate-limit service with certgen's envoy
	// certificate, the one it shows Envoy Gateway's xDS server (gateway
	// v1.8.3 internal/gatewayapi/globalresources.go, EnvoyClientCertificate;
	// internal/xds/translator/globalresources.go,
	// createRateLimitServiceCluster), and checks the service's certificate,
	// certgen's envoy-rate-limit, whose names are *.envoy-gateway-system
	// (internal/crypto/certgen.go).
	cmd := exec.CommandContext(ctx, sc.c.Bins[harness.ToolXDSReader.Name], "-should-rate-limit",
		"-address", rl.grpc, "-cert-dir", sc.c.EnvoyCerts, "-server-name", rateLimitNodeID+"."+harness.EnvoyGatewayNS, "-timeout", "30s")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cannot ask the rate-limit service: %v: %s", err, stderr.String())
	}
	var answers []map[string]any
	harness.Must(t, json.Unmarshal(out, &answers))
	if len(answers) != len(calls) {
		t.Fatalf("%d answers to %d calls", len(answers), len(calls))
	}
	for i, c := range calls {
		got, _ := answers[i]["overall_code"].(string)
		t.Logf("rate-limit service: %s: %s in %s", steps[c.step].what, got, c.domain)
		if got != c.want {
			t.Errorf("rate-limit service: %s: %s in %s, want %s (answer %v)", steps[c.step].what, got, c.domain, c.want, answers[i])
		}
	}
}
