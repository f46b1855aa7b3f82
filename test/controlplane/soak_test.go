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
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/route"
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

// soakRoute is one ModelRoute of the soak as the work last wrote it.
type soakRoute struct {
	name string
	// secret names the API-key Secret of its hosted backend; "" for a
	// route whose other tier is a second in-cluster backend.
	secret string
	// port is its in-cluster backend's port, which a change flips.
	port int64
	// weight is its in-cluster backend's weight in its tier, which a
	// change draws anew (1 to 4).
	weight int64
	// extra: a third backend, in-cluster, in the in-cluster backend's
	// tier, which a change adds or removes.
	extra bool
	// swapped: the in-cluster backend (and the extra one) in tier 1 and
	// the other in tier 0, which a change flips.
	swapped bool
}

// Backend names of a soak route: its in-cluster backend, the extra one,
// and its other tier's.
const (
	soakLocal = "local"
	soakExtra = "extra"
	soakSpare = "spare"
)

// localTier is the tier of the in-cluster backend (and the extra one).
func (r soakRoute) localTier() int64 {
	if r.swapped {
		return 1
	}
	return 0
}

// host is the in-cluster hostname of its backend b.
func (r soakRoute) host(b string) string {
	if b == soakLocal {
		return r.name + "." + teamControlNS + ".svc.cluster.local"
	}
	return r.name + "-" + b + "." + teamControlNS + ".svc.cluster.local"
}

// other is the name of its other tier's backend.
func (r soakRoute) other() string {
	if r.secret != "" {
		return hostedBackend
	}
	return soakSpare
}

// object is the ModelRoute: its in-cluster backend, with the extra one
// when it has it, in one tier, and in the other a hosted keyed backend or
// a second in-cluster one.
func (r soakRoute) object() *unstructured.Unstructured {
	u := plainRoute(r.name, r.host(soakLocal))
	spec := u.Object["spec"].(map[string]any)
	local := spec["backends"].([]any)[0].(map[string]any)
	local["endpoint"].(map[string]any)["port"] = r.port
	local["priority"] = r.localTier()
	local["weight"] = r.weight
	bs := []any{local}
	if r.extra {
		bs = append(bs, map[string]any{
			"name":     soakExtra,
			"endpoint": map[string]any{"hostname": r.host(soakExtra), "port": int64(8000), "tls": false},
			"schema":   map[string]any{"name": "OpenAI"},
			"priority": r.localTier(),
		})
	}
	other := map[string]any{
		"name":     soakSpare,
		"endpoint": map[string]any{"hostname": r.host(soakSpare), "port": int64(8000), "tls": false},
		"schema":   map[string]any{"name": "OpenAI"},
	}
	if r.secret != "" {
		other = hostedKeyedBackend(r.secret)
	}
	other["priority"] = 1 - r.localTier()
	spec["backends"] = append(bs, other)
	return u
}

// localities is what Envoy must be told of the route's backends, by
// their Backend's name on the gateway cluster: a locality each, in the
// backend's tier, of its weight, at its port (0: not checked, the hosted
// backend's). The function divides a tier's weights by their greatest
// common divisor (internal/route/tiers.go): the extra backend's weight is
// 1, so the in-cluster backend keeps its weight beside it, and a backend
// alone in its tier has weight 1.
func (r soakRoute) localities() map[string]locality {
	w := int64(1)
	if r.extra {
		w = r.weight
	}
	out := map[string]locality{
		names.BackendObject(r.name, soakLocal): {priority: r.localTier(), weight: w, port: r.port},
		names.BackendObject(r.name, r.other()): {priority: 1 - r.localTier(), weight: 1},
	}
	if r.secret == "" {
		out[names.BackendObject(r.name, soakSpare)] = locality{priority: 1 - r.localTier(), weight: 1, port: 8000}
	}
	if r.extra {
		out[names.BackendObject(r.name, soakExtra)] = locality{priority: r.localTier(), weight: 1, port: 8000}
	}
	return out
}

// priorities are the tiers of its localities.
func (r soakRoute) priorities() []int64 {
	var out []int64
	for _, l := range r.localities() {
		out = append(out, l.priority)
	}
	slices.Sort(out)
	return out
}

// remote names the objects the route composes on the gateway cluster, by
// resource: what its deletion may take.
func (r soakRoute) remote() map[string][]string {
	backends := []string{names.BackendObject(r.name, soakLocal), names.BackendObject(r.name, r.other())}
	if r.extra {
		backends = append(backends, names.BackendObject(r.name, soakExtra))
	}
	out := map[string][]string{
		"aigatewayroutes":   {r.name},
		"httproutes":        {r.name},
		"backends":          backends,
		"aiservicebackends": backends,
	}
	if r.secret != "" {
		out["backendsecuritypolicies"] = []string{names.BackendObject(r.name, hostedBackend)}
		out["secrets"] = []string{names.BackendObject(r.name, hostedBackend)}
	}
	return out
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
	defer sc.sp.write(t)
	s := &soak{sc: sc, t: t,
		faults: rand.New(rand.NewPCG(seed, 1)), work: rand.New(rand.NewPCG(seed, 2)),
		busy: map[string]bool{}, counts: map[string]int{}, routes: map[string]*soakRoute{}, deleted: map[string]soakRoute{},
		keys: map[string]string{}, image: extProcImage,
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
	c.apply(sc.ctx, c.readYAMLFile("example/gateway/xr.yaml")...)
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
		c.apply(sc.ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": name, "namespace": teamControlNS},
			"type":     "Opaque", "data": map[string]any{apiKeyField: s.keys[name]},
		}})
	}
	start := time.Now()
	for range soakRoutes {
		s.createRoute()
	}
	sc.eventually(t, waitRoutes(soakRoutes), "the soak's gateway and routes ready", s.truth)
	t.Logf("the gateway and %d routes ready %s after the routes were created", soakRoutes, time.Since(start).Round(time.Second))
	sc.sp.record("soak", "routes-ready-after-creation", seconds(time.Since(start)))
}

// newKey makes a key no Object, status, event or log may hold.
func (s *soak) newKey(what string) string {
	k := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "sk-soak-%d-%d", time.Now().UnixNano(), s.work.Uint64()))
	s.sc.w.forbid(what, k)
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
		sleep(s.sc.ctx, time.Until(at))
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
		s.sc.w.check(t)
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
		p := c.ps.latest(v)
		if s.busy[v] || p == nil || p.running() {
			continue
		}
		s.count("exited-by-itself-"+v, "%s exited (%v); starting it again", v, p.err)
		s.start(v)
	}
}

// start starts an exited process again with the same arguments: AI
// Gateway with the ext-proc image it last had, Envoy Gateway with its
// configuration, both in their namespaces again (startIsolated).
func (s *soak) start(victim string) {
	c, u := s.sc.c, s.sc.s.up
	switch victim {
	case "ai-gateway":
		c.startAIGateway(s.sc.ctx, u, s.image)
	case "envoy-gateway":
		c.launchEnvoyGateway(u)
	case "provider-kubernetes":
		c.provider = c.ps.respawn(c.provider)
	default:
		c.ps.respawn(c.ps.latest(victim))
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

// doFault starts one fault, chosen by the fault schedule.
func (s *soak) doFault() {
	free := slices.DeleteFunc(slices.Clone(soakVictims), func(v string) bool { return s.busy[v] })
	switch k := s.faults.IntN(10); {
	case k < 4 && len(free) > 0:
		n := 1
		if s.faults.IntN(4) == 0 {
			n = 2 // several at once
		}
		for range min(n, len(free)) {
			v := free[s.faults.IntN(len(free))]
			free = slices.DeleteFunc(free, func(x string) bool { return x == v })
			s.kill(v, s.gap(s.faults, 1, 15))
		}
	case k < 7 && len(free) > 0:
		s.hang(free[s.faults.IntN(len(free))], s.gap(s.faults, 5, 60))
	case k == 7 && len(s.busy) == 0:
		s.restartAPIServer(s.gap(s.faults, 1, 5))
	case k == 8 && !s.busy["ai-gateway"] && len(s.busy) > 0:
		s.rollout()
	case k == 9 && !s.refused:
		s.refuseSpec(s.gap(s.faults, 10, 60))
	default:
		// The drawn fault cannot start now (its victim is already in
		// one, or a rollout needs another fault active): none this time.
		s.count("fault-skipped", "none this time")
	}
}

// kill kills a process with SIGKILL and starts it again after down.
func (s *soak) kill(victim string, down time.Duration) {
	c := s.sc.c
	s.busy[victim] = true
	s.count("kill-"+victim, "kill -9 %s, back in %s", victim, down.Round(time.Second))
	c.ps.latest(victim).kill()
	s.later(down, "start "+victim+" again", func() {
		s.start(victim)
		delete(s.busy, victim)
	})
}

// hang stops a process's group with SIGSTOP and resumes it after d.
func (s *soak) hang(victim string, d time.Duration) {
	p := s.sc.c.ps.latest(victim)
	s.busy[victim] = true
	s.count("hang-"+victim, "SIGSTOP %s for %s", victim, d.Round(time.Second))
	p.signal(syscall.SIGSTOP)
	s.later(d, "SIGCONT "+victim, func() {
		p.signal(syscall.SIGCONT)
		delete(s.busy, victim)
	})
}

// restartAPIServer kills kube-apiserver, and starts it again after down
// on the same etcd, and waits until it serves.
func (s *soak) restartAPIServer(down time.Duration) {
	c := s.sc.c
	s.count("restart-kube-apiserver", "kill -9 kube-apiserver, back in %s", down.Round(time.Second))
	c.ps.latest("kube-apiserver").kill()
	sleep(s.sc.ctx, down)
	start := time.Now()
	p := c.ps.respawn(c.ps.latest("kube-apiserver"))
	must(s.t, waitFor(s.sc.ctx, p, 200*time.Millisecond, "kube-apiserver serving again", func(ctx context.Context) (bool, error) {
		_, err := c.dyn.Resource(gvrNamespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	}))
	s.t.Logf("kube-apiserver serving again %s after its start", time.Since(start).Round(100*time.Millisecond))
}

// rollout restarts AI Gateway with another ext-proc image while another
// fault is active: AI Gateway writes a new marker into the Envoy pod
// template, and the Deployment controller rolls.
func (s *soak) rollout() {
	s.rollouts++
	s.image = fmt.Sprintf("%s-soak.%d", extProcImage, s.rollouts)
	s.count("rollout-during-fault", "AI Gateway with ext-proc image %s while %v are faulted", s.image, slices.Sorted(maps.Keys(s.busy)))
	s.sc.c.restartAIGateway(s.sc.ctx, s.sc.s.up, s.image)
}

// refuseSpec sets a spec.connection.bufferLimit the function refuses, so
// that the gateway says SpecRefused and keeps serving what it composed
// (scenario 5h), and fixes it after d.
func (s *soak) refuseSpec(d time.Duration) {
	s.refused = true
	s.count("refused-spec", "spec.connection.bufferLimit %s for %s", bufferLimitRefused, d.Round(time.Second))
	s.sc.patchGateway(s.t, fmt.Sprintf(`{"spec":{"connection":{"bufferLimit":%q}}}`, bufferLimitRefused))
	s.later(d, "fix spec.connection.bufferLimit", s.fixSpec)
}

// fixSpec removes the refused bufferLimit again.
func (s *soak) fixSpec() {
	if !s.refused {
		return
	}
	s.refused = false
	s.sc.patchGateway(s.t, `{"spec":{"connection":{"bufferLimit":null}}}`)
}

// doWork does one piece of work, chosen by the work schedule.
func (s *soak) doWork() {
	switch k := s.work.IntN(16); {
	case k < 2 && len(s.routes) < soakRoutes+soakRouteSpread:
		s.createRoute()
	case k < 4:
		s.changePort()
	case k < 5:
		s.reweight()
	case k < 6:
		s.toggleExtra()
	case k < 7:
		s.swapTiers()
	case k < 9 && len(s.routes) > soakRoutes-soakRouteSpread:
		s.deleteRoute()
	case k < 11:
		s.rotateKey()
	case k < 13:
		s.rotateCaller()
	case k < 14:
		s.changeDrain()
	default:
		s.renewCert()
	}
}

// createRoute creates the next route: every other one keyed.
func (s *soak) createRoute() {
	r := &soakRoute{name: fmt.Sprintf("soak-%03d", s.next), port: 8000, weight: 1}
	if s.next%2 == 0 {
		r.secret = fmt.Sprintf("soak-key-%d", (s.next/2)%soakKeys)
	}
	s.next++
	s.routes[r.name] = r
	s.count("create-route", "%s (API key Secret %q)", r.name, r.secret)
	s.sc.c.apply(s.sc.ctx, r.object())
}

// pick returns a live route, chosen by the work schedule.
func (s *soak) pick() *soakRoute {
	ns := slices.Sorted(maps.Keys(s.routes))
	return s.routes[ns[s.work.IntN(len(ns))]]
}

// changePort flips a route's in-cluster backend's port.
func (s *soak) changePort() {
	r := s.pick()
	r.port = 8000 + 8001 - r.port
	s.count("change-route-port", "%s: its local backend's port to %d", r.name, r.port)
	s.updateRoute(r)
}

// reweight draws a new weight for a route's in-cluster backend.
func (s *soak) reweight() {
	r := s.pick()
	r.weight = 1 + s.work.Int64N(4)
	s.count("change-route-weight", "%s: its local backend's weight to %d", r.name, r.weight)
	s.updateRoute(r)
}

// toggleExtra adds a route's extra backend, or removes it, allowing, by
// name, the deletions its removal asks for: its Backend and
// AIServiceBackend on the gateway cluster, and the two Objects that made
// them.
func (s *soak) toggleExtra() {
	r := s.pick()
	r.extra = !r.extra
	if r.extra {
		s.count("change-route-add-backend", "%s: backend %s added in tier %d", r.name, soakExtra, r.localTier())
	} else {
		why := "the soak removes backend " + soakExtra + " from " + r.name
		w := s.sc.w
		for _, res := range []string{"backends", "aiservicebackends"} {
			w.allow(allowance{reason: why, resource: res, namespace: w.teamNS, name: names.BackendObject(r.name, soakExtra)})
		}
		for _, rn := range []string{"backend-" + soakExtra, "aibackend-" + soakExtra} {
			w.allow(allowance{reason: why + ": its Objects go", resource: "objects", namespace: teamControlNS, composite: r.name, resourceName: rn})
		}
		s.count("change-route-remove-backend", "%s: backend %s removed", r.name, soakExtra)
	}
	s.updateRoute(r)
}

// swapTiers swaps a route's tiers.
func (s *soak) swapTiers() {
	r := s.pick()
	r.swapped = !r.swapped
	s.count("change-route-tiers", "%s: its in-cluster backend in tier %d", r.name, r.localTier())
	s.updateRoute(r)
}

// updateRoute writes a route's spec as r says.
func (s *soak) updateRoute(r *soakRoute) {
	want := r.object()
	must(s.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := s.sc.get(s.sc.ctx, gvrModelRoute, teamControlNS, r.name)
		if err != nil {
			return err
		}
		cur.Object["spec"] = want.Object["spec"]
		_, err = s.sc.c.dyn.Resource(gvrModelRoute).Namespace(teamControlNS).Update(s.sc.ctx, cur, metav1.UpdateOptions{})
		return err
	}))
}

// changeDrain changes the gateway's spec.envoy.drainTimeout, between its
// default and drainTimeoutChanged: Envoy Gateway gives the Envoy pods a
// termination grace period of the drain timeout and 300 s, so the
// Deployment rolls (scenario 5e).
func (s *soak) changeDrain() {
	v := "null"
	if s.drain == "" {
		s.drain = drainTimeoutChanged
		v = strconv.Quote(s.drain)
	} else {
		s.drain = ""
	}
	s.count("change-drain-timeout", "spec.envoy.drainTimeout to %s", v)
	s.sc.patchGateway(s.t, `{"spec":{"envoy":{"drainTimeout":`+v+`}}}`)
}

// gracePeriod is the Envoy pods' termination grace period Envoy Gateway
// derives from the drain timeout now: the drain timeout and 300 s (gateway
// v1.8.3 internal/infrastructure/kubernetes/proxy/resource_provider.go,
// expectedTerminationGracePeriodSeconds).
func (s *soak) gracePeriod() int64 {
	d := s.drain
	if d == "" {
		d = v1alpha1.DefaultDrainTimeout
	}
	dd, err := time.ParseDuration(d)
	must(s.t, err)
	return int64(dd.Seconds()) + 300
}

// deleteRoute deletes a route, allowing the deletions it brings by name.
func (s *soak) deleteRoute() {
	r := s.pick()
	why := "the soak deletes " + r.name
	sc := s.sc
	sc.w.allow(allowance{reason: why, resource: "modelroutes", namespace: teamControlNS, name: r.name})
	sc.w.allow(allowance{reason: why + ": its Objects go with it", resource: "objects", namespace: teamControlNS, composite: r.name})
	for res, ns := range r.remote() {
		for _, n := range ns {
			sc.w.allow(allowance{reason: why + ": its objects on the gateway cluster go with it", resource: res, namespace: sc.w.teamNS, name: n})
		}
	}
	delete(s.routes, r.name)
	s.deleted[r.name] = *r
	s.count("delete-route", "%s", r.name)
	err := sc.c.dyn.Resource(gvrModelRoute).Namespace(teamControlNS).Delete(sc.ctx, r.name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		s.t.Fatalf("cannot delete the ModelRoute %s: %v", r.name, err)
	}
}

// rotateKey gives an API-key Secret a new key.
func (s *soak) rotateKey() {
	name := fmt.Sprintf("soak-key-%d", s.work.IntN(soakKeys))
	s.keys[name] = s.newKey("the API key of " + name)
	s.count("rotate-key", "%s", name)
	s.sc.setAPIKey(s.t, name, s.keys[name])
}

// rotateCaller gives the caller alice a new key.
func (s *soak) rotateCaller() {
	s.caller = s.newKey("caller alice")
	s.count("rotate-caller", "alice")
	s.sc.putCallers(s.t, callersSecret, map[string]any{"alice": s.caller})
}

// renewCert renews the gateway's TLS certificate.
func (s *soak) renewCert() {
	now := time.Now()
	s.cert = selfSigned(s.t, tlsHostname, now.Add(-time.Hour), now.Add(24*time.Hour))
	s.count("renew-tls", "serial %s", s.cert.serial)
	s.sc.putTLSSecret(s.t, "renewed", s.cert)
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
	if m := sc.gatewayAuthReady(ctx, []string{names.CallerSecret(gatewayXRName, callersSecret)}, 1); m != "" {
		return "caller auth: " + m
	}
	if m := sc.copyHolds(ctx, names.CallerSecret(gatewayXRName, callersSecret), map[string]string{"alice": s.caller}); m != "" {
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
		u, err := sc.get(ctx, gvrModelRoute, teamControlNS, n)
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
		if _, err := sc.get(ctx, gvrModelRoute, teamControlNS, n); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("the deleted ModelRoute %s is still there (%v)", n, err)
		}
		if _, err := sc.get(ctx, gvrAIRoute, sc.w.teamNS, n); !apierrors.IsNotFound(err) {
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
	want := int64At(d.Object, "spec", "replicas")
	got := fmt.Sprintf("generation %d observed %d, replicas %d updated %d available %d", d.GetGeneration(), int64At(d.Object, "status", "observedGeneration"),
		int64At(d.Object, "status", "replicas"), int64At(d.Object, "status", "updatedReplicas"), int64At(d.Object, "status", "availableReplicas"))
	if int64At(d.Object, "status", "observedGeneration") < d.GetGeneration() || int64At(d.Object, "status", "replicas") != want ||
		int64At(d.Object, "status", "updatedReplicas") != want || int64At(d.Object, "status", "availableReplicas") != want {
		return fmt.Sprintf("the Envoy Deployment is rolling out (%d wanted): %s", want, got)
	}
	if g, want := int64At(d.Object, "spec", "template", "spec", "terminationGracePeriodSeconds"), s.gracePeriod(); g != want {
		return fmt.Sprintf("the Envoy pod template's terminationGracePeriodSeconds is %d, want %d for the drain timeout now", g, want)
	}
	r, _, _ := unstructured.NestedMap(sc.gatewayXR(ctx).Object, "status", "rollout")
	if int64At(r, "generation") != d.GetGeneration() || int64At(r, "updatedReplicas") != want {
		return fmt.Sprintf("the InferenceGateway's status.rollout %v does not report the Deployment's %s yet", r, got)
	}
	pods, err := sc.c.dyn.Resource(gvrPod).Namespace(envoyGatewayNS).List(ctx, metav1.ListOptions{LabelSelector: labelOwningGatewayName + "=" + gatewayXRName})
	if err != nil {
		return err.Error()
	}
	for i := range pods.Items {
		p := &corev1.Pod{}
		if err := fromUnstructured(&pods.Items[i], p); err != nil {
			return err.Error()
		}
		if p.DeletionTimestamp != nil {
			continue
		}
		if c := sidecar(p); c == nil || c.Image != s.image {
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
			l, err := sc.c.dyn.Resource(gvrObject).Namespace(teamControlNS).List(ctx, metav1.ListOptions{LabelSelector: labelComposite + "=" + n})
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
		model := teamControlNS + "/" + n
		r := s.routes[n]
		checks = append(checks, checkRouteOn(model, gateway.ListenerHTTPS),
			checkFailover(model, r.priorities(), []int64{429, 503}, int64(v1alpha1.DefaultNumRetries)), checkLocalities(model, r.localities()))
	}
	for _, n := range slices.Sorted(maps.Keys(s.deleted)) {
		checks = append(checks, checkNoRoute(teamControlNS+"/"+n))
	}
	sc.readXDS(t, "soak", all(checks...))

	sc.noSecretsInObjects(t, "after the soak")
	s.noSecretsInLogs()
	sc.noDeletions(t)
	w.check(t)
	obs, viol := w.sidecarSummary()
	t.Logf("sidecar invariant: %d observations, %d violations", obs, viol)

	// At rest: no route left in a loop.
	from := time.Now().Add(30 * time.Second)
	sleep(sc.ctx, time.Until(from.Add(soakRestWindow)))
	live := slices.Sorted(maps.Keys(s.routes))
	sc.restReconciles(t, "soak", live, from, from.Add(soakRestWindow))
	calls, err := sc.c.functionCallsByName("ModelRoute", from, from.Add(soakRestWindow))
	must(t, err)
	for _, n := range live {
		if got := bursts(calls[n], time.Second); len(got) > soakRestMaxReconciles {
			t.Errorf("ModelRoute %s was reconciled %d times in the %s at rest after the soak (at %v): a loop was left behind", n, len(got), soakRestWindow, got)
		}
	}

	sp := sc.sp
	for k, n := range s.counts {
		sp.record("soak", "count-"+k, float64(n))
	}
	sp.record("soak", "routes-at-end", float64(len(s.routes)))
	sp.record("soak", "routes-deleted", float64(len(s.deleted)))
	sp.record("soak", "sidecar-observations", float64(obs))
	sp.record("soak", "sidecar-violations", float64(viol))
	sp.record("soak", "recovered-after-last-fault", seconds(recovered))
}

// noSecretsInLogs fails the test for every forbidden value in the log of a
// process that handles the keys: the function, Crossplane and
// provider-kubernetes.
func (s *soak) noSecretsInLogs() {
	s.sc.w.mu.Lock()
	secrets := slices.Clone(s.sc.w.secrets)
	s.sc.w.mu.Unlock()
	for _, name := range []string{"function", "crossplane", "provider-kubernetes"} {
		p := s.sc.c.ps.latest(name)
		b, err := os.ReadFile(p.log)
		if err != nil {
			s.t.Errorf("cannot read the log of %s: %v", name, err)
			continue
		}
		for _, v := range secrets {
			if strings.Contains(string(b), v.value) {
				s.t.Errorf("the log of %s holds %s", name, v.what)
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
