package controlplane

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
	"github.com/modelplaneai/function-inference-gateway/test/internal/toolchain"
)

// Deliberate breaks. The suite is worth its minutes only if it fails when
// the function gets wrong the two things it exists for: judging a rollout
// from the Deployment controller's own counters, and never taking a model
// offline by dropping its route. Each break below makes one such mistake
// in a copy of one source file, compiled into the function with
// `go build -overlay`, so the working tree is never touched. The last
// ones break AI Gateway's controller instead, in a copy of its module
// (harness.Controllers.WithAIGatewayEdit): what they show the suite
// catches is an AI Gateway that no longer does what the function relies
// on.
//
//	go test -v -timeout 60m -run '^TestControlPlane$' ./test/controlplane -args -break=NAME
//
// runs the suite against the broken function, and must fail; narrowed to
// the break's scenarios (its entry's scenarios field), such as
// -run '^TestControlPlane$/^(1-2_|5c_)', it fails sooner.
//
//	go test -v -timeout 90m -run '^TestBreaksAreCaught$' ./test/controlplane -args -breaks
//
// (make controlplane-breaks) runs the suite once per break in a child
// process, narrowed to the break's scenarios, and requires each run to
// fail where the break's entry says, and to leave no process behind;
// -run '^TestBreaksAreCaught$/^(NAME|NAME)$' runs some of them.
var (
	breakName   = flag.String("break", "", "build the function with the named deliberate break (see breaks_test.go); the run is expected to fail")
	checkBreaks = flag.Bool("breaks", false, "run TestControlPlane once per deliberate break in a child process and require each run to fail")
)

// An edit replaces the one occurrence of old with new.
type edit struct{ old, new string }

// An upstreamEdit replaces the one occurrence of old with new in file, a
// path in AI Gateway's pinned module.
type upstreamEdit struct {
	file string
	edit
}

// A deliberateBreak is a mistake the suite must catch.
type deliberateBreak struct {
	name  string
	what  string
	file  string // relative to the repository root
	edits []edit
	// aiGateway, instead of file and edits, breaks AI Gateway's
	// controller: for a promise that holds by AI Gateway's behaviour, not
	// by anything the function composes, this shows the check of it can
	// fail, as it would on an AI Gateway release that behaves otherwise.
	aiGateway *upstreamEdit
	// caughtBy is text the failing run prints where the suite catches
	// the break.
	caughtBy string
	// scenarios is the subtest filter of the scenarios of TestControlPlane
	// the break needs, passed to the child run as
	// -test.run=^TestControlPlane$/<scenarios>: 1-2_ first, since every
	// scenario starts from the state the ones before left, then the one
	// that catches the break; the scenarios in between are skipped. Empty
	// runs them all, which costs no more for a break caught in 1-2_: the
	// suite stops at the first scenario that fails.
	scenarios string
}

var breaks = []deliberateBreak{{
	name: "ready-replicas",
	what: "GatewayReady taken from the Deployment's readyReplicas reaching spec.replicas, the usual readiness check, instead of the rollout rule: " +
		"ready old-template pods, which may lack the ext-proc sidecar, count",
	file: "internal/gatewayready/evidence.go",
	edits: []edit{{
		old: "\te.Rollout = v\n",
		new: "\tswitch ready := d.Spec.Replicas != nil && d.Status.ReadyReplicas >= *d.Spec.Replicas; {\n" +
			"\tcase ready:\n\t\tv = rollout.Verdict{Ready: true}\n" +
			"\tcase v.Ready:\n\t\tv = rollout.Verdict{Failed: []rollout.Check{rollout.NoReplicaAvailable}}\n\t}\n" +
			"\te.Rollout = v\n",
	}},
	// Scenario 1, while AI Gateway's filter-config Secret is held: the
	// first pods, without the sidecar, are ready, so readyReplicas
	// reaches spec.replicas and the break says GatewayReady=True while no
	// pod can serve a model.
	caughtBy: "GatewayReady=True while AI Gateway's filter-config Secret was missing",
}, {
	name: "route-gated-on-gateway",
	what: "the model's AIGatewayRoute composed only while the gateway is GatewayReady, and dropped otherwise, " +
		"so that Crossplane deletes it (or never creates it) while the gateway rolls out",
	file: "internal/route/compose.go",
	edits: []edit{{
		old: "\t\tb.compose(res, model, refs, bs, accepted, served)\n",
		new: "\t\tif !gw.verdict.Ready {\n\t\t\trefs = nil\n\t\t\tdelete(res.Implied, ResourceRoute)\n\t\t}\n" +
			"\t\tb.compose(res, model, refs, bs, accepted, served)\n",
	}},
	// Scenario 2: the route must reach the gateway cluster at once.
	caughtBy:  "waiting for the model's AIGatewayRoute on the gateway cluster",
	scenarios: "^(1-2_)",
}, {
	name: "route-dropped-once-composed",
	what: "the model's AIGatewayRoute, once composed, dropped whenever the gateway is not GatewayReady, " +
		"so that Crossplane garbage-collects it, and the model goes offline, during every rollout",
	file: "internal/route/compose.go",
	edits: []edit{{
		old: "\t\tb.compose(res, model, refs, bs, accepted, served)\n",
		new: "\t\tif _, composed := req.Observed[ResourceRoute]; composed && !gw.verdict.Ready {\n" +
			"\t\t\trefs = nil\n\t\t\tdelete(res.Implied, ResourceRoute)\n\t\t}\n" +
			"\t\tb.compose(res, model, refs, bs, accepted, served)\n",
	}},
	// The deletion watch, in scenario 3's rollout. In scenario 2 the route
	// now reaches the gateway cluster only once its backends have, which
	// is mostly after the first rollout: a run of 1-2 alone passed with
	// this break (2026-12-04).
	caughtBy:  "unexpected deletion of aigatewayroutes ",
	scenarios: "^(1-2_|3_)",
}, {
	name: "route-ready-without-gateway",
	what: "RoutingReady judged from the route alone, without waiting for the gateway, " +
		"so a ModelRoute says True while Envoy pods without the ext-proc sidecar serve",
	file: "internal/route/gatewayview.go",
	edits: []edit{{
		old: "\tif !v.verdict.Ready {\n\t\tp.Add(v.reason, v.why)\n",
		new: "\tif false && !v.verdict.Ready {\n\t\tp.Add(v.reason, v.why)\n",
	}},
	// Scenario 2: the first Envoy pods, without the sidecar, are Ready
	// while the ModelRoute is composed.
	caughtBy:  "sidecar invariant: RoutingReady=True on ",
	scenarios: "^(1-2_)",
}, {
	name: "key-reference-at-creation",
	what: "the API-key Secret's patchesFrom reference added from the credential Object's first composition, " +
		"so that provider-kubernetes writes the key it patched into the in-memory manifest back into the Object " +
		"when it adds its finalizer (crossplane-runtime v2.4.0 managed reconciler, AddFinalizer)",
	file: "internal/remote/remote.go",
	edits: []edit{{
		old: "\t\tMayReference: ok && (o.hasReferences() || (o.finalized() && (o.Reported() || o.created()))),\n",
		new: "\t\tMayReference: true || ok && (o.hasReferences() || (o.finalized() && (o.Reported() || o.created()))),\n",
	}},
	// The world's look at every Object it observes, from scenario 2 on.
	caughtBy:  "holds the openrouter API key",
	scenarios: "^(1-2_)",
}, {
	name: "retry-without-429",
	what: "the default retry policy retries 503 only, so a rate-limited tier answers 429 to the client instead of failing over",
	file: "internal/apis/v1alpha1/gateway_types.go",
	edits: []edit{{
		old: "DefaultRetryStatusCodes = []int32{429, 503}",
		new: "DefaultRetryStatusCodes = []int32{503}",
	}},
	// Scenario 2's xDS: the route's retry policy.
	caughtBy:  "retries status codes [503], not 429",
	scenarios: "^(1-2_)",
}, {
	name: "panic-threshold-zero",
	what: "the failover policy's panic threshold 0 whatever spec.failover says, so Envoy never ignores its passive health checks",
	file: "internal/gateway/resources.go",
	edits: []edit{{
		old: "PanicThreshold: new(uint32(b.spec.PanicThreshold()))",
		new: "PanicThreshold: new(uint32(0 * b.spec.PanicThreshold()))",
	}},
	// Scenario 2's xDS: the cluster's common_lb_config.
	caughtBy:  "healthy panic threshold 0%, want 50%",
	scenarios: "^(1-2_)",
}, {
	name: "panic-threshold-default",
	what: "the failover policy's panic threshold Envoy's default of 50 whatever spec.failover.panicThreshold says",
	file: "internal/gateway/resources.go",
	edits: []edit{{
		old: "PanicThreshold: new(uint32(b.spec.PanicThreshold()))",
		new: "PanicThreshold: new(uint32(v1alpha1.DefaultPanicThreshold))",
	}},
	// Scenario 2c's xDS: a default threshold passes scenario 2's check.
	caughtBy:  "healthy panic threshold 50%, want 30%",
	scenarios: "^(1-2_|2c_)",
}, {
	name: "body-limit-default",
	what: "every listener's body limit the default 50Mi whatever spec.connection.bufferLimit says",
	file: "internal/gateway/resources.go",
	edits: []edit{{
		old: "\tlimit := b.spec.BufferLimit()\n",
		new: "\tlimit := v1alpha1.DefaultBufferLimit\n",
	}},
	// Scenario 2c's xDS: a default limit passes scenario 2's check.
	caughtBy:  "per_connection_buffer_limit_bytes 5.24288e+07, want 67108864",
	scenarios: "^(1-2_|2c_)",
}, {
	name: "caller-header-kept",
	what: "a client's own x-modelplane-caller kept at the front door, so an open gateway logs and forwards whatever caller a client claims",
	file: "internal/gateway/resources.go",
	edits: []edit{{
		old: "EarlyRequestHeaders: &egv1a1.HTTPHeaderFilter{Remove: []string{names.CallerHeader}}",
		new: "EarlyRequestHeaders: nil",
	}},
	// Scenario 2's xDS: the HTTP connection manager's early header mutation.
	caughtBy:  "the early header mutation does not remove x-modelplane-caller",
	scenarios: "^(1-2_)",
}, {
	name: "budget-caller-in-default",
	what: "a budget's default rule no longer leaves out the callers with a limit of their own, so they are held to both",
	file: "internal/gateway/budgets.go",
	edits: []edit{{
		old: "others = append(others, egv1a1.HeaderMatch{Type: ptr.To(egv1a1.HeaderMatchExact), Name: names.CallerHeader, Value: new(c.Name), Invert: new(true)})",
		new: "_ = c",
	}},
	// Scenario 5c2's xDS: the default rule's inverted match on ci-pipeline.
	caughtBy:  "leaving ci-pipeline out of the default false",
	scenarios: "^(1-2_|5c2_)",
}, {
	name: "access-log-on-header",
	what: "the access log reads the caller from the request header again, which the upstream filter removes for third-party backends",
	file: "internal/gateway/envoy.go",
	edits: []edit{{
		old: `"%DYNAMIC_METADATA(" + aiGatewayMetadata + ":" + CallerMetadataKey + ")%"`,
		new: `"%REQ(" + names.CallerHeader + ")%"`,
	}},
	// Scenario 2's xDS: the listeners' access logs.
	caughtBy:  "logs the caller as %REQ(x-modelplane-caller)%",
	scenarios: "^(1-2_)",
}, {
	name: "caller-not-forwarded",
	what: "caller authentication forwards the client ID in another header, so neither the access log nor the backends learn who called",
	file: "internal/gateway/auth.go",
	edits: []edit{{
		old: "ForwardClientIDHeader: new(names.CallerHeader),",
		new: `ForwardClientIDHeader: new("x-client-id"),`,
	}},
	// Scenario 5c's xDS: each model route's api_key_auth config.
	caughtBy:  "want the client ID in x-modelplane-caller and the key hidden",
	scenarios: "^(1-2_|5c_)",
}, {
	name: "body-limit-one-listener",
	what: "the ClientTrafficPolicy, and with it the body limit, on the http listener only, so that with TLS the https listener, " +
		"which serves the models, buffers Envoy Gateway's default instead of spec.connection.bufferLimit",
	file: "internal/gateway/resources.go",
	edits: []edit{{
		old: "\t\tPolicyTargetReferences: b.gatewayTarget(),\n\t\tConnection:",
		new: "\t\tPolicyTargetReferences: egv1a1.PolicyTargetReferences{TargetRefs: []gwapiv1.LocalPolicyTargetReferenceWithSectionName{{\n" +
			"\t\t\tLocalPolicyTargetReference: b.gatewayTarget().TargetRefs[0].LocalPolicyTargetReference, SectionName: new(gwapiv1.SectionName(ListenerHTTP)),\n" +
			"\t\t}}},\n\t\tConnection:",
	}},
	// Scenario 5f's xDS: without TLS the Gateway has the http listener
	// alone, so only the https listener shows it.
	caughtBy:  "inference-gateway/https: per_connection_buffer_limit_bytes",
	scenarios: "^(1-2_|5f_)",
}, {
	name: "weighted-clusters",
	what: "the failover policy also asks for zone-aware load balancing (preferLocal), which makes Envoy Gateway build a cluster per backend " +
		"and route by weighted_clusters, whose clusters AI Gateway does not recognise: no priorities, so the fallback tier takes live traffic",
	file: "internal/gateway/resources.go",
	edits: []edit{{
		old: "\t\tClusterSettings: egv1a1.ClusterSettings{\n\t\t\tRetry: &egv1a1.Retry{\n",
		new: "\t\tClusterSettings: egv1a1.ClusterSettings{\n" +
			"\t\t\tLoadBalancer: &egv1a1.LoadBalancer{Type: egv1a1.RoundRobinLoadBalancerType, ZoneAware: &egv1a1.ZoneAware{PreferLocal: &egv1a1.PreferLocalZone{}}},\n" +
			"\t\t\tRetry: &egv1a1.Retry{\n",
	}},
	// Scenario 2's xDS: the model's route action (gateway v1.8.3
	// internal/ir/xds.go, HTTPRoute.NeedsClusterPerSetting).
	caughtBy:  "splits by weight across clusters",
	scenarios: "^(1-2_)",
}, {
	name: "no-previous-priorities",
	what: "the failover policy without numAttemptsPerPriority, so Envoy Gateway installs no previous_priorities retry plugin " +
		"and a retry may go to the tier that just failed instead of the next",
	file: "internal/gateway/resources.go",
	edits: []edit{{
		old: "NumAttemptsPerPriority: ptr.To[int32](1),",
		new: "NumAttemptsPerPriority: nil,",
	}},
	// Scenario 2's xDS: the route's retry policy.
	caughtBy:  `has retry_priority "", want envoy.retry_priorities.previous_priorities`,
	scenarios: "^(1-2_)",
}, {
	name: "num-retries-default",
	what: "the failover policy's retries the default 3 whatever spec.failover.numRetries says",
	file: "internal/gateway/resources.go",
	edits: []edit{{
		old: "NumRetries:             new(b.spec.NumRetries()),",
		new: "NumRetries:             new(v1alpha1.DefaultNumRetries),",
	}},
	// Scenario 2c's xDS: the default passes scenario 2's check.
	caughtBy:  "has num_retries 3, want 2",
	scenarios: "^(1-2_|2c_)",
}, {
	name: "callers-first-secret-only",
	what: "the caller-auth SecurityPolicy names only the first callers' Secret in use, so the callers of every other selected Secret " +
		"get no credential and are denied while status.auth counts them",
	file: "internal/gateway/auth.go",
	edits: []edit{{
		old: "\t\trefs := make([]gwapiv1.SecretObjectReference, len(use))\n",
		new: "\t\tuse = use[:1]\n\t\trefs := make([]gwapiv1.SecretObjectReference, len(use))\n",
	}},
	// Scenario 5c, when the second callers' Secret joins the policy.
	caughtBy:  "the SecurityPolicy references [" + names.CallerSecret(gatewayXRName, callersSecret) + "], want [",
	scenarios: "^(1-2_|5c_)",
}, {
	name: "healthz-http-only",
	what: "the front door's /healthz route on the http listener only, so with TLS a load balancer that probes https gets no answer",
	file: "internal/gateway/frontdoor.go",
	edits: []edit{{
		old: "\tif b.spec.TLSEnabled() {\n\t\tlisteners = append(listeners, ListenerHTTPS)\n\t}\n",
		new: "",
	}},
	// Scenario 5f's xDS: the https listener's route configuration.
	caughtBy:  "no /healthz route on the https listener",
	scenarios: "^(1-2_|5f_)",
}, {
	name: "redirect-301",
	what: "the http-to-https redirect a 301, after which most clients send a model call's POST again as a GET without its body",
	file: "internal/gateway/frontdoor.go",
	edits: []edit{{
		old: "StatusCode: new(308),",
		new: "StatusCode: new(301),",
	}},
	// Scenario 5f's xDS: the http listener's routes.
	caughtBy:  "of the http listener is not a 308 to https://",
	scenarios: "^(1-2_|5f_)",
}, {
	name: "ndots-missing",
	what: "the EnvoyProxy without the Deployment patch that gives the Envoy pods ndots 1, so every backend hostname is looked up " +
		"under each search domain first and Envoy answers 503 until its DNS cluster resolves",
	file: "internal/gateway/resources.go",
	edits: []edit{{
		old: "Patch:    dnsPatch,",
		new: "Patch:    nil,",
	}},
	// Scenario 2: the Envoy Deployment Envoy Gateway renders.
	caughtBy:  "want ndots 1",
	scenarios: "^(1-2_)",
}, {
	name: "rename-without-waiting",
	what: "a renamed backend's new name put in the route at once, before its new Backend and AIServiceBackend are on the gateway cluster " +
		"(internal/route/names.go), so that the serving route names objects that do not exist",
	file: "internal/route/tiers.go",
	edits: []edit{{
		old: "\t\trefs[i].legacy = bs.viaLegacy[refs[i].backend.Name]\n",
		new: "\t\trefs[i].legacy = \"\"\n",
	}},
	// Scenario 5b3: the route moves to the new names after the upgrade;
	// its Object names them before the provider has observed theirs
	// (watchOrder: by resourceVersion, whatever the timing).
	caughtBy:  "while the backend's objects moved: ",
	scenarios: "^(1-2_|5b3_)",
}, {
	name: "aigw-ext-proc-off-on-route",
	what: "AI Gateway no longer enables its ext_proc on the routes it generates, so a model's requests reach the backend " +
		"unread: no model-name routing, no token counting, no provider translation. No composed object decides this " +
		"(ai-gateway v1.0.0 internal/extensionserver/post_translate_modify.go enables it on every route whose HTTPRoute it " +
		"generated), so the break is AI Gateway's",
	aiGateway: &upstreamEdit{file: "internal/extensionserver/post_translate_modify.go", edit: edit{
		old: "\t\t\t\troute.TypedPerFilterConfig[aiGatewayExtProcName] = fcAny\n",
		new: "\t\t\t\t_ = fcAny\n",
	}},
	// Scenario 2's xDS: the model route's typed_per_filter_config. The
	// edit leaves AI Gateway counting the route as its own, so the
	// listener keeps the filter and the route-level part of the check is
	// the one that fails: AI Gateway inserts the listener's filter only
	// when some route of its own is enabled (post_translate_modify.go,
	// enableRouterLevelAIGatewayExtProcOnRoute returns whether one is).
	caughtBy:  extProcFilter + " not enabled",
	scenarios: "^(1-2_)",
}, {
	name: "aigw-caller-metadata-first",
	what: "AI Gateway puts the filter that copies x-modelplane-caller into metadata first in the chain, before caller " +
		"authentication has written the caller (and after the front door removed a client's own), so the access log names " +
		"no caller. Nothing composed orders the HTTP filters (ai-gateway v1.0.0 internal/extensionserver/header_to_metadata.go " +
		"inserts it right before the router), so the break is AI Gateway's",
	aiGateway: &upstreamEdit{file: "internal/extensionserver/header_to_metadata.go", edit: edit{
		old: "\t\t\tmgr.HttpFilters = append(mgr.HttpFilters[:i], append([]*httpconnectionmanagerv3.HttpFilter{filter}, mgr.HttpFilters[i:]...)...)\n",
		new: "\t\t\t_ = i\n\t\t\tmgr.HttpFilters = append([]*httpconnectionmanagerv3.HttpFilter{filter}, mgr.HttpFilters...)\n",
	}},
	// Scenario 5c's xDS, where caller authentication is on: the HTTP
	// connection manager's filter order.
	caughtBy:  headerToMetadataFilter + " at 0, want after " + apiKeyAuthFilter,
	scenarios: "^(1-2_|5c_)",
}, {
	name: "access-merge-dropped",
	what: "the access SecurityPolicy composed without mergeType, so that on the restricted model's route it replaces the " +
		"Gateway's caller-auth policy instead of being merged into it: Envoy then checks no key there and denies every caller",
	file: "internal/route/access.go",
	edits: []edit{{
		old: "\t\t\tMergeType: ptr.To(egv1a1.StrategicMerge),\n",
		new: "",
	}},
	// Scenario 5c3's xDS, read once Envoy Gateway accepted the policy
	// (it accepts one without mergeType too): api_key_auth on every
	// model route. 5c2 first, for Envoy Gateway with rate limiting.
	caughtBy:  "no " + apiKeyAuthFilter + " config",
	scenarios: "^(1-2_|5c2_|5c3_)",
}}

// breakControllers returns pair with AI Gateway's controller broken, when
// the break named by -break is one of AI Gateway's.
func breakControllers(tb testing.TB, pair harness.Controllers) harness.Controllers {
	tb.Helper()
	if *breakName == "" {
		return pair
	}
	b, err := findBreak(*breakName)
	harness.Must(tb, err)
	if b.aiGateway == nil {
		return pair
	}
	tb.Logf("DELIBERATE BREAK %q: %s. This run is expected to fail (%q).", b.name, b.what, b.caughtBy)
	return pair.WithAIGatewayEdit("break-"+b.name, b.aiGateway.file, b.aiGateway.old, b.aiGateway.new)
}

// run is the child run's -test.run filter: TestControlPlane, narrowed to
// the break's scenarios.
func (b deliberateBreak) run() string {
	if b.scenarios == "" {
		return "^TestControlPlane$"
	}
	return "^TestControlPlane$/" + b.scenarios
}

// findBreak returns the break named name.
func findBreak(name string) (deliberateBreak, error) {
	var known []string
	for _, b := range breaks {
		if b.name == name {
			return b, nil
		}
		known = append(known, b.name)
	}
	return deliberateBreak{}, fmt.Errorf("cannot find the deliberate break %q; known breaks: %s", name, strings.Join(known, ", "))
}

// overlay writes the broken copy of b.file and a go build overlay that
// swaps it in, into dir, and returns the go build flag. It fails when an
// edit's old text is not in the file exactly once, so a break never goes
// stale silently when the source moves on.
func (b deliberateBreak) overlay(tb testing.TB, root, dir string) string {
	tb.Helper()
	src := filepath.Join(root, b.file)
	body, err := os.ReadFile(src)
	harness.Must(tb, err)
	s := string(body)
	for _, e := range b.edits {
		if n := strings.Count(s, e.old); n != 1 {
			tb.Fatalf("cannot apply the deliberate break %q: %q occurs %d times in %s, want once; update breaks_test.go", b.name, e.old, n, b.file)
		}
		s = strings.Replace(s, e.old, e.new, 1)
	}
	broken := filepath.Join(dir, "break-"+filepath.Base(b.file))
	harness.WriteFile(tb, broken, []byte(s))
	ov, err := json.Marshal(map[string]map[string]string{"Replace": {src: broken}})
	harness.Must(tb, err)
	path := filepath.Join(dir, "break-overlay.json")
	harness.WriteFile(tb, path, ov)
	return "-overlay=" + path
}

// functionFlags returns the go build flags for the function under test:
// none, or the overlay of the break named by -break.
func functionFlags(tb testing.TB, root, dir string) []string {
	tb.Helper()
	if *breakName == "" {
		return nil
	}
	b, err := findBreak(*breakName)
	harness.Must(tb, err)
	if b.aiGateway != nil {
		return nil // breakControllers
	}
	tb.Logf("DELIBERATE BREAK %q: %s. This run is expected to fail (%q).", b.name, b.what, b.caughtBy)
	return []string{b.overlay(tb, root, dir)}
}

// TestBreaksAreCaught runs the whole suite once per deliberate break, each
// in a child test process, and requires every run to fail where the break
// says it is caught, and to leave no process it started behind.
func TestBreaksAreCaught(t *testing.T) {
	if !*checkBreaks {
		t.Skip("runs the control plane once per deliberate break; enable with -args -breaks")
	}
	if testing.Short() {
		t.Skip("starts a whole control plane per break")
	}
	root, err := toolchain.Root()
	harness.Must(t, err)
	// The runs' logs outlive the test, under bin/ (not committed): a break
	// caught in the wrong place is understood from its log.
	logDir := filepath.Join(root, "bin", "breaks")
	harness.Must(t, os.MkdirAll(logDir, 0o755))
	for _, b := range breaks {
		t.Run(b.name, func(t *testing.T) {
			timeout := 40 * time.Minute
			if dl, ok := t.Deadline(); ok && time.Until(dl)-time.Minute < timeout {
				timeout = time.Until(dl) - time.Minute
			}
			runID := fmt.Sprintf("break-%s-%d", b.name, time.Now().UnixNano())
			logPath := filepath.Join(logDir, b.name+".log")
			f, err := os.Create(logPath)
			harness.Must(t, err)
			cmd := exec.Command(os.Args[0], "-test.run="+b.run(), "-test.v", "-test.count=1",
				"-test.timeout="+timeout.String(), "-break="+b.name)
			cmd.Env = append(os.Environ(), harness.RunIDEnv+"="+runID)
			var out bytes.Buffer
			w := io.MultiWriter(f, &out)
			cmd.Stdout, cmd.Stderr = w, w
			start := time.Now()
			err = cmd.Run()
			_ = f.Close()
			log := out.String()
			t.Logf("the run with %q ended after %s: %v; its log: %s", b.name, time.Since(start).Round(time.Second), err, logPath)

			var exit *exec.ExitError
			switch {
			case err == nil:
				t.Errorf("the suite passed with the deliberate break %q (%s): it does not catch it", b.name, b.what)
			case !errors.As(err, &exit):
				t.Errorf("cannot run the suite with %q: %v", b.name, err)
			case strings.Contains(log, "panic: test timed out"):
				t.Errorf("the run with %q timed out instead of failing on a check", b.name)
			case !strings.Contains(log, "--- FAIL: TestControlPlane"):
				t.Errorf("the run with %q failed before the suite ran", b.name)
			case !caughtIn(log, b.caughtBy):
				t.Errorf("the run with %q failed, but not where it should be caught: no %q in its output", b.name, b.caughtBy)
			}
			for l := range strings.SplitSeq(log, "\n") {
				if strings.Contains(l, b.caughtBy) || strings.Contains(l, "--- FAIL") || strings.Contains(l, "DELIBERATE BREAK") ||
					strings.Contains(l, "gave up after") || strings.Contains(l, "invariant violated") {
					t.Logf("child: %s", strings.TrimSpace(l))
				}
			}
			if left := harness.Survivors(runID); len(left) > 0 {
				t.Errorf("processes the run with %q started are still there after it ended: %s", b.name, strings.Join(left, "; "))
			}
			if t.Failed() {
				t.Logf("last lines of the run:\n%s", harness.Tail(logPath, 80))
			}
		})
	}
}

// caughtIn reports whether a run's output holds caughtBy on a line other
// than the run's own "DELIBERATE BREAK" banner, which quotes it.
func caughtIn(log, caughtBy string) bool {
	for l := range strings.SplitSeq(log, "\n") {
		if strings.Contains(l, caughtBy) && !strings.Contains(l, "DELIBERATE BREAK") {
			return true
		}
	}
	return false
}

// TestBreaksCompile applies every deliberate break and builds the broken
// function (for a break of AI Gateway's, checks its edit applies to the
// pinned module, without the minutes of building the controller), so that a break whose source has moved on fails here, in every
// run, rather than only when someone runs the breaks.
func TestBreaksCompile(t *testing.T) {
	root, err := toolchain.Root()
	harness.Must(t, err)
	for _, b := range breaks {
		t.Run(b.name, func(t *testing.T) {
			if b.aiGateway != nil {
				harness.CheckAIGatewayEdit(t.Context(), t, b.aiGateway.file, b.aiGateway.old)
				return
			}
			dir := t.TempDir()
			if _, err := toolchain.Function(dir, b.overlay(t, root, dir)); err != nil {
				t.Errorf("cannot build the function with the deliberate break %q: %v", b.name, err)
			}
		})
	}
}

// TestBreakScenarios: each break's scenarios are empty or a filter that
// starts with scenarios 1-2, which every other scenario starts from.
func TestBreakScenarios(t *testing.T) {
	valid := regexp.MustCompile(`^\^\(1-2_(\|[0-9][a-z]?[0-9]?_)*\)$`)
	for _, b := range breaks {
		if b.scenarios != "" && !valid.MatchString(b.scenarios) {
			t.Errorf("the deliberate break %q runs the scenarios %q, want ^(1-2_|...) with scenario prefixes such as 2c_ or 5c2_", b.name, b.scenarios)
		}
	}
}

// TestCaughtIn: the banner that quotes where a break is caught does not
// count as catching it.
func TestCaughtIn(t *testing.T) {
	const by = "the function says GatewayReady=True"
	cases := map[string]struct {
		log  string
		want bool
	}{
		"BannerOnly":   {log: `DELIBERATE BREAK "x": ... This run is expected to fail ("` + by + `").` + "\n--- FAIL: TestControlPlane", want: false},
		"CaughtByLine": {log: "DELIBERATE BREAK ...\ngave up after 3m0s waiting for ...: " + by + " (Serving)", want: true},
		"Nothing":      {log: "--- FAIL: TestControlPlane", want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, caughtIn(tc.log, by)); diff != "" {
				t.Errorf("caughtIn(...): -want, +got:\n%s", diff)
			}
		})
	}
}
