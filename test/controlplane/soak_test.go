package controlplane

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/route"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// The soak: one gateway with TLS and caller auth, about twenty ModelRoutes,
// and two seeded random schedules run at once for CONTROLPLANE_SOAK, one of
// faults (processes killed and restarted, hung and resumed, the API server
// restarted, Envoy rolled while a fault is active, the gateway's function
// answering Fatal) and one of work (routes created, changed and deleted,
// keys rotated, the callers' Secret and the TLS certificate renewed). The
// world checks its invariants on every event throughout; after the last
// fault, every condition must come to the truth of the final state.
const (
	soakEnv     = "CONTROLPLANE_SOAK"
	soakSeedEnv = "CONTROLPLANE_SOAK_SEED"
	// soakRoutes is how many ModelRoutes the soak starts with; the work
	// keeps their number within soakRouteSpread of it.
	soakRoutes      = 20
	soakRouteSpread = 4
	// soakKeys is how many API-key Secrets the keyed routes share.
	soakKeys = 3
	// soakRecoveryBound bounds the wait, after the last fault has ended,
	// for every condition to equal the truth. It is a bound, not a goal:
	// the time it took is a figure in the timeline (recovered-after-last-
	// fault). A route the function backs off longest looks again within
	// compose.HeldBackBackoff's 30 s while its breaker is open, and a
	// restarted Crossplane reconciles every composite at its start.
	soakRecoveryBound = 3 * time.Minute
	// soakRestWindow is how long the reconciles are counted after the
	// recovery, and soakRestMaxReconciles the most one route may have in
	// it: at rest a ready route is looked at on a watch event or its
	// ten-minute TTL, a route left in a loop at the smallest back-off
	// (10 s and less) has nine and more.
	soakRestWindow        = 90 * time.Second
	soakRestMaxReconciles = 6
)

// soakVictims are the processes a fault kills or hangs: the controllers
// the function's truth passes through. kube-apiserver is restarted on
// its own (soak.restartAPIServer); etcd keeps the data.
var soakVictims = []string{"ai-gateway", "envoy-gateway", "provider-kubernetes", "crossplane", "function", "kube-controller-manager"}

// soakDuration reads CONTROLPLANE_SOAK: 0 when it is not set (the test is
// skipped), an error when it is not a positive duration.
func soakDuration(v string, set bool) (time.Duration, error) {
	return envDuration(soakEnv, "how long to soak", "10m", v, set)
}

// envDuration reads the value v of the variable env, set when the variable
// is set at all: 0 when it is not, an error naming what it is for and an
// example when it is set but not a positive duration, so that a typo does
// not run something else.
func envDuration(env, what, example, v string, set bool) (time.Duration, error) {
	if !set {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("cannot read %s=%q as %s: want a positive duration, such as %s", env, v, what, example)
	}
	return d, nil
}

// soakSeed reads CONTROLPLANE_SOAK_SEED, or makes a seed from the clock
// when it is not set.
func soakSeed(v string, set bool) (uint64, error) {
	if !set {
		return uint64(time.Now().UnixNano()), nil
	}
	s, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cannot read %s=%q as a seed: want a whole number, as a soak prints first", soakSeedEnv, v)
	}
	return s, nil
}

// soakPending is the end of a fault: it runs at its time, or at once when
// the soak's time is up.
type soakPending struct {
	at   time.Time
	what string
	do   func()
}

// soak holds one soak's state. Everything runs on the test's goroutine,
// in time order, so a seed replays the same decisions.
type soak struct {
	sc          *scenarios
	t           *testing.T
	faults      *rand.Rand
	work        *rand.Rand
	pending     []soakPending
	busy        map[string]bool // victims in a fault now
	counts      map[string]int  // faults and work by kind
	routes      map[string]*soakRoute
	deleted     map[string]soakRoute
	keys        map[string]string // API-key Secret -> its key, base64
	caller      string            // alice's caller key, base64
	cert        tlsCert
	image       string // AI Gateway's ext-proc image now
	next        int    // the next route's number
	rollouts    int
	refused     bool   // the gateway's spec is refused now
	drain       string // the gateway's spec.envoy.drainTimeout now; "" for the default
	lastFaultAt time.Time
	// now is the planned time of the event being run.
	now time.Time
}

// TestSoak runs the soak (make controlplane-soak: ten minutes). It prints
// its seed first; CONTROLPLANE_SOAK_SEED=<seed> replays its schedules. It
// records under "soak" in $CONTROLPLANE_TIMELINE the faults and the work
// by kind, the sidecar invariant's observations and violations, how long
// after the last fault every condition told the truth, and the reconciles
// per route at rest after it.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole control plane and faults it for minutes")
	}
	d, err := soakDuration(os.LookupEnv(soakEnv))
	if err != nil {
		t.Fatal(err)
	}
	if d == 0 {
		t.Skipf("set %s=10m (make controlplane-soak) to run it", soakEnv)
	}
	seed, err := soakSeed(os.LookupEnv(soakSeedEnv))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("soak seed %d: replay its schedules with %s=%d", seed, soakSeedEnv, seed)

	sc := bringUp(t)
	defer sc.sp.Write(t)
	s := &soak{sc: sc, t: t,
		faults: rand.New(rand.NewPCG(seed, 1)), work: rand.New(rand.NewPCG(seed, 2)),
		busy: map[string]bool{}, counts: map[string]int{}, routes: map[string]*soakRoute{}, deleted: map[string]soakRoute{},
		keys: map[string]string{}, image: harness.ExtProcImage,
	}
	s.setUp()
	// The counts are the soak's own: the set-up's routes are not work.
	s.counts = map[string]int{}
	s.run(d)
	s.recover()
}

// setUp makes the gateway, with TLS and caller auth, and the routes, and
// waits until all of them are ready.
func (s *soak) setUp() {
	t, sc, c := s.t, s.sc, s.sc.c
	c.Apply(sc.ctx, c.ReadYAMLFile("example/gateway/xr.yaml")...)
	now := time.Now()
	s.cert = selfSigned(t, tlsHostname, now.Add(-time.Hour), now.Add(24*time.Hour))
	sc.putTLSSecret(t, "first", s.cert)
	s.caller = s.newKey("caller alice")
	sc.putCallers(t, callersSecret, map[string]any{"alice": s.caller})
	sc.patchGateway(t, fmt.Sprintf(`{"spec":{"hostname":%q,"tls":{"certificateRefs":[{"name":%q}]},"auth":{"method":"APIKey","apiKey":{"secretSelector":{"matchLabels":{%q:%q}}}}}}`,
		tlsHostname, tlsSecretName, callersLabel, callersLabelTrue))
	for i := range soakKeys {
		name := fmt.Sprintf("soak-key-%d", i)
		s.keys[name] = s.newKey("the API key of " + name)
		c.Apply(sc.ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": name, "namespace": harness.TeamControlNS},
			"type":     "Opaque", "data": map[string]any{harness.APIKeyField: s.keys[name]},
		}})
	}
	start := time.Now()
	for range soakRoutes {
		s.createRoute()
	}
	sc.eventually(t, waitRoutes(soakRoutes), "the soak's gateway and routes ready", s.truth)
	t.Logf("the gateway and %d routes ready %s after the routes were created", soakRoutes, time.Since(start).Round(time.Second))
	sc.sp.Record("soak", "routes-ready-after-creation", seconds(time.Since(start)))
}

// NewKey makes a key no Object, status, event or log may hold.
func (s *soak) newKey(what string) string {
	k := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "sk-soak-%d-%d", time.Now().UnixNano(), s.work.Uint64()))
	s.sc.w.Forbid(what, k)
	return k
}

// run drives both schedules for d, then ends every fault still active.
func (s *soak) run(d time.Duration) {
	t := s.t
	begin := time.Now()
	end := begin.Add(d)
	nextFault := begin.Add(s.gap(s.faults, 10, 40))
	nextWork := begin.Add(s.gap(s.work, 3, 15))
	for {
		at, what := nextWork, "work"
		if nextFault.Before(at) {
			at, what = nextFault, "fault"
		}
		if len(s.pending) > 0 && s.pending[0].at.Before(at) {
			at, what = s.pending[0].at, "pending"
		}
		if at.After(end) {
			break
		}
		harness.Sleep(s.sc.ctx, time.Until(at))
		if s.sc.ctx.Err() != nil {
			t.Fatal(s.sc.ctx.Err())
		}
		// Times are planned from the schedule, not from when an action
		// ended, so that a seed replays the same order of events as long
		// as no action outlasts the next one's time.
		s.now = at
		switch what {
		case "work":
			s.doWork()
			nextWork = at.Add(s.gap(s.work, 3, 15))
		case "fault":
			s.doFault()
			nextFault = at.Add(s.gap(s.faults, 10, 40))
		case "pending":
			p := s.pending[0]
			s.pending = s.pending[1:]
			p.do()
		}
		s.reviveExited()
		s.sc.w.Check(t)
	}
	for len(s.pending) > 0 {
		p := s.pending[0]
		s.pending = s.pending[1:]
		t.Logf("the soak's time is up: %s now", p.what)
		p.do()
	}
	if s.refused {
		s.fixSpec()
	}
	s.lastFaultAt = time.Now()
	t.Logf("soak over after %s: %v", time.Since(begin).Round(time.Second), s.counts)
}

// reviveExited starts again, as a kubelet restarts a container that
// exited, every process that exited by itself and is not in a fault,
// whatever made it exit, and counts it: the soak's faults are its own,
// and a controller that stays down would fail the recovery for a reason
// no cluster has.
func (s *soak) reviveExited() {
	c := s.sc.c
	for _, v := range append(slices.Clone(soakVictims), "kube-apiserver") {
		p := c.Procs.Latest(v)
		if s.busy[v] || p == nil || p.Running() {
			continue
		}
		s.count("exited-by-itself-"+v, "%s exited (%v); starting it again", v, p.Err)
		s.start(v)
	}
}

// start starts an exited process again with the same arguments: AI
// Gateway with the ext-proc image it last had, Envoy Gateway with its
// configuration, both in their namespaces again (startIsolated).
func (s *soak) start(victim string) {
	c, u := s.sc.c, s.sc.s.Up
	switch victim {
	case "ai-gateway":
		c.StartAIGateway(s.sc.ctx, u, s.image)
	case "envoy-gateway":
		c.LaunchEnvoyGateway(u)
	case "provider-kubernetes":
		c.Provider = c.Procs.Respawn(c.Provider)
	default:
		c.Procs.Respawn(c.Procs.Latest(victim))
	}
}

// gap is a random wait from lo to hi seconds.
func (s *soak) gap(r *rand.Rand, lo, hi int) time.Duration {
	return time.Duration(lo)*time.Second + time.Duration(r.Int64N(int64(hi-lo)*int64(time.Second)))
}

// later schedules the end of a fault.
func (s *soak) later(d time.Duration, what string, do func()) {
	s.pending = append(s.pending, soakPending{at: s.now.Add(d), what: what, do: do})
	slices.SortStableFunc(s.pending, func(a, b soakPending) int { return a.at.Compare(b.at) })
}

// count notes one fault or piece of work and logs it.
func (s *soak) count(kind, format string, args ...any) {
	s.counts[kind]++
	s.t.Logf("soak %s: %s", kind, fmt.Sprintf(format, args...))
}

// truth returns "" when every condition equals the truth of the world now:
// the gateway serves TLS with the current certificate and authenticates
// with the current caller key, every live route is RoutingReady with its
// current key delivered, and every deleted route is gone with what it
// composed.
func (s *soak) truth(ctx context.Context) string {
	sc := s.sc
	if m := sc.gatewayServesTLS(ctx); m != "" {
		return "the gateway: " + m
	}
	if m := sc.gatewayAuthReady(ctx, []string{names.CallerSecret(harness.GatewayXRName, callersSecret)}, 1); m != "" {
		return "caller auth: " + m
	}
	if m := sc.copyHolds(ctx, names.CallerSecret(harness.GatewayXRName, callersSecret), map[string]string{"alice": s.caller}); m != "" {
		return m
	}
	if m := sc.copyHoldsCert(ctx, s.cert); m != "" {
		return "the TLS certificate: " + m
	}
	if m := s.rolledOut(ctx); m != "" {
		return m
	}
	for _, n := range slices.Sorted(maps.Keys(s.routes)) {
		r := s.routes[n]
		u, err := sc.get(ctx, harness.GVRModelRoute, harness.TeamControlNS, n)
		if err != nil {
			return err.Error()
		}
		if m := wantCondition(u, route.ConditionType, "True"); m != "" {
			return "ModelRoute " + n + ": " + m
		}
		if r.secret != "" {
			if m := sc.routeKeyIs(ctx, n, hostedBackend, s.keys[r.secret]); m != "" {
				return "ModelRoute " + n + ": " + m
			}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(s.deleted)) {
		if _, err := sc.get(ctx, harness.GVRModelRoute, harness.TeamControlNS, n); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("the deleted ModelRoute %s is still there (%v)", n, err)
		}
		if _, err := sc.get(ctx, harness.GVRAIRoute, sc.w.TeamNS, n); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("the deleted ModelRoute %s's route is still on the gateway cluster (%v)", n, err)
		}
	}
	return ""
}

// rolledOut returns "" when the Envoy Deployment's rollout is done, as its
// own counters say and as the InferenceGateway's status.rollout reports
// them, and every Envoy pod that is not going has AI Gateway's sidecar of
// the image it last had: a GatewayReady=True before that is a lie the
// world's invariants look for, and one after it is the truth.
func (s *soak) rolledOut(ctx context.Context) string {
	sc := s.sc
	d := sc.envoyDeployment(ctx)
	if d == nil {
		return "no Envoy Deployment"
	}
	want := harness.Int64At(d.Object, "spec", "replicas")
	got := fmt.Sprintf("generation %d observed %d, replicas %d updated %d available %d", d.GetGeneration(), harness.Int64At(d.Object, "status", "observedGeneration"),
		harness.Int64At(d.Object, "status", "replicas"), harness.Int64At(d.Object, "status", "updatedReplicas"), harness.Int64At(d.Object, "status", "availableReplicas"))
	if harness.Int64At(d.Object, "status", "observedGeneration") < d.GetGeneration() || harness.Int64At(d.Object, "status", "replicas") != want ||
		harness.Int64At(d.Object, "status", "updatedReplicas") != want || harness.Int64At(d.Object, "status", "availableReplicas") != want {
		return fmt.Sprintf("the Envoy Deployment is rolling out (%d wanted): %s", want, got)
	}
	if g, want := harness.Int64At(d.Object, "spec", "template", "spec", "terminationGracePeriodSeconds"), s.gracePeriod(); g != want {
		return fmt.Sprintf("the Envoy pod template's terminationGracePeriodSeconds is %d, want %d for the drain timeout now", g, want)
	}
	r, _, _ := unstructured.NestedMap(sc.gatewayXR(ctx).Object, "status", "rollout")
	if harness.Int64At(r, "generation") != d.GetGeneration() || harness.Int64At(r, "updatedReplicas") != want {
		return fmt.Sprintf("the InferenceGateway's status.rollout %v does not report the Deployment's %s yet", r, got)
	}
	pods, err := sc.c.Dyn.Resource(harness.GVRPod).Namespace(harness.EnvoyGatewayNS).List(ctx, metav1.ListOptions{LabelSelector: harness.LabelOwningGatewayName + "=" + harness.GatewayXRName})
	if err != nil {
		return err.Error()
	}
	for i := range pods.Items {
		p := &corev1.Pod{}
		if err := harness.FromUnstructured(&pods.Items[i], p); err != nil {
			return err.Error()
		}
		if p.DeletionTimestamp != nil {
			continue
		}
		if c := harness.Sidecar(p); c == nil || c.Image != s.image {
			return fmt.Sprintf("the Envoy pod %s has no sidecar of the image %s", p.Name, s.image)
		}
	}
	return ""
}

// recover waits, after the last fault, until every condition tells the
// truth and the rollout is done, then checks Envoy's xDS, that nothing
// leaked or went, and that the routes are at rest.
func (s *soak) recover() {
	t, sc, w := s.t, s.sc, s.sc.w
	sc.eventually(t, soakRecoveryBound, "every condition true to the final state after the last fault", func(ctx context.Context) string {
		s.reviveExited()
		// Objects of deleted routes that AI Gateway's lost finalizer
		// removal holds get the operator's workaround
		// (aigwfinalizer_test.go); anything else still fails the wait.
		for n := range s.deleted {
			l, err := sc.c.Dyn.Resource(harness.GVRObject).Namespace(harness.TeamControlNS).List(ctx, metav1.ListOptions{LabelSelector: harness.LabelComposite + "=" + n})
			if err != nil {
				return err.Error()
			}
			if m := sc.objectsLeft(ctx, t, l.Items); m != "" {
				return "the deleted ModelRoute " + n + ": " + m
			}
		}
		return s.truth(ctx)
	})
	recovered := time.Since(s.lastFaultAt)
	t.Logf("every condition true to the final state %s after the last fault ended", recovered.Round(100*time.Millisecond))
	if st := sc.agree(t); st != "True" {
		t.Errorf("GatewayReady=%s after the soak, with the rollout done", st)
	}

	var checks []func(xdsDump) string
	for _, n := range slices.Sorted(maps.Keys(s.routes)) {
		model := harness.TeamControlNS + "/" + n
		r := s.routes[n]
		checks = append(checks, checkRouteOn(model, gateway.ListenerHTTPS),
			checkFailover(model, r.priorities(), []int64{429, 503}, int64(v1alpha1.DefaultNumRetries)), checkLocalities(model, r.localities()))
	}
	for _, n := range slices.Sorted(maps.Keys(s.deleted)) {
		checks = append(checks, checkNoRoute(harness.TeamControlNS+"/"+n))
	}
	sc.readXDS(t, "soak", all(checks...))

	sc.noSecretsInObjects(t, "after the soak")
	s.noSecretsInLogs()
	sc.noDeletions(t)
	w.Check(t)
	obs, viol := w.SidecarSummary()
	t.Logf("sidecar invariant: %d observations, %d violations", obs, viol)

	// At rest: no route left in a loop.
	from := time.Now().Add(30 * time.Second)
	harness.Sleep(sc.ctx, time.Until(from.Add(soakRestWindow)))
	live := slices.Sorted(maps.Keys(s.routes))
	sc.restReconciles(t, "soak", live, from, from.Add(soakRestWindow))
	calls, err := sc.c.FunctionCallsByName("ModelRoute", from, from.Add(soakRestWindow))
	harness.Must(t, err)
	for _, n := range live {
		if got := bursts(calls[n], time.Second); len(got) > soakRestMaxReconciles {
			t.Errorf("ModelRoute %s was reconciled %d times in the %s at rest after the soak (at %v): a loop was left behind", n, len(got), soakRestWindow, got)
		}
	}

	sp := sc.sp
	for k, n := range s.counts {
		sp.Record("soak", "count-"+k, float64(n))
	}
	sp.Record("soak", "routes-at-end", float64(len(s.routes)))
	sp.Record("soak", "routes-deleted", float64(len(s.deleted)))
	sp.Record("soak", "sidecar-observations", float64(obs))
	sp.Record("soak", "sidecar-violations", float64(viol))
	sp.Record("soak", "recovered-after-last-fault", seconds(recovered))
}

// noSecretsInLogs fails the test for every forbidden value in the log of a
// process that handles the keys: the function, Crossplane and
// provider-kubernetes.
func (s *soak) noSecretsInLogs() {
	s.sc.w.Mu.Lock()
	secrets := slices.Clone(s.sc.w.Secrets)
	s.sc.w.Mu.Unlock()
	for _, name := range []string{"function", "crossplane", "provider-kubernetes"} {
		p := s.sc.c.Procs.Latest(name)
		b, err := os.ReadFile(p.Log)
		if err != nil {
			s.t.Errorf("cannot read the log of %s: %v", name, err)
			continue
		}
		for _, v := range secrets {
			if strings.Contains(string(b), v.Value) {
				s.t.Errorf("the log of %s holds %s", name, v.What)
			}
		}
	}
}

// checkNoRoute: no route matches the model: a deleted ModelRoute leaves
// nothing in Envoy.
func checkNoRoute(model string) func(xdsDump) string {
	return func(d xdsDump) string {
		if r, rc := d.modelRoute(model); r != nil {
			return fmt.Sprintf("the deleted model %q is still routed, in %q", model, rc)
		}
		return ""
	}
}
