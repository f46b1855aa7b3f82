package controlplane

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

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
	c.Procs.Latest(victim).Kill()
	s.later(down, "start "+victim+" again", func() {
		s.start(victim)
		delete(s.busy, victim)
	})
}

// hang stops a process's group with SIGSTOP and resumes it after d.
func (s *soak) hang(victim string, d time.Duration) {
	p := s.sc.c.Procs.Latest(victim)
	s.busy[victim] = true
	s.count("hang-"+victim, "SIGSTOP %s for %s", victim, d.Round(time.Second))
	p.Signal(syscall.SIGSTOP)
	s.later(d, "SIGCONT "+victim, func() {
		p.Signal(syscall.SIGCONT)
		delete(s.busy, victim)
	})
}

// restartAPIServer kills kube-apiserver, and starts it again after down
// on the same etcd, and waits until it serves.
func (s *soak) restartAPIServer(down time.Duration) {
	c := s.sc.c
	s.count("restart-kube-apiserver", "kill -9 kube-apiserver, back in %s", down.Round(time.Second))
	c.Procs.Latest("kube-apiserver").Kill()
	harness.Sleep(s.sc.ctx, down)
	start := time.Now()
	p := c.Procs.Respawn(c.Procs.Latest("kube-apiserver"))
	harness.Must(s.t, harness.WaitFor(s.sc.ctx, p, 200*time.Millisecond, "kube-apiserver serving again", func(ctx context.Context) (bool, error) {
		_, err := c.Dyn.Resource(harness.GVRNamespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	}))
	s.t.Logf("kube-apiserver serving again %s after its start", time.Since(start).Round(100*time.Millisecond))
}

// rollout restarts AI Gateway with another ext-proc image while another
// fault is active: AI Gateway writes a new marker into the Envoy pod
// template, and the Deployment controller rolls.
func (s *soak) rollout() {
	s.rollouts++
	s.image = fmt.Sprintf("%s-soak.%d", harness.ExtProcImage, s.rollouts)
	s.count("rollout-during-fault", "AI Gateway with ext-proc image %s while %v are faulted", s.image, slices.Sorted(maps.Keys(s.busy)))
	s.sc.c.RestartAIGateway(s.sc.ctx, s.sc.s.Up, s.image)
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
	s.sc.c.Apply(s.sc.ctx, r.object())
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
			w.Allow(harness.Allowance{Reason: why, Resource: res, Namespace: w.TeamNS, Name: names.BackendObject(r.name, soakExtra)})
		}
		for _, rn := range []string{"backend-" + soakExtra, "aibackend-" + soakExtra} {
			w.Allow(harness.Allowance{Reason: why + ": its Objects go", Resource: "objects", Namespace: harness.TeamControlNS, Composite: r.name, ResourceName: rn})
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
	harness.Must(s.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := s.sc.get(s.sc.ctx, harness.GVRModelRoute, harness.TeamControlNS, r.name)
		if err != nil {
			return err
		}
		cur.Object["spec"] = want.Object["spec"]
		_, err = s.sc.c.Dyn.Resource(harness.GVRModelRoute).Namespace(harness.TeamControlNS).Update(s.sc.ctx, cur, metav1.UpdateOptions{})
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
	harness.Must(s.t, err)
	return int64(dd.Seconds()) + 300
}

// deleteRoute deletes a route, allowing the deletions it brings by name.
func (s *soak) deleteRoute() {
	r := s.pick()
	why := "the soak deletes " + r.name
	sc := s.sc
	sc.w.Allow(harness.Allowance{Reason: why, Resource: "modelroutes", Namespace: harness.TeamControlNS, Name: r.name})
	sc.w.Allow(harness.Allowance{Reason: why + ": its Objects go with it", Resource: "objects", Namespace: harness.TeamControlNS, Composite: r.name})
	for res, ns := range r.remote() {
		for _, n := range ns {
			sc.w.Allow(harness.Allowance{Reason: why + ": its objects on the gateway cluster go with it", Resource: res, Namespace: sc.w.TeamNS, Name: n})
		}
	}
	delete(s.routes, r.name)
	s.deleted[r.name] = *r
	s.count("delete-route", "%s", r.name)
	err := sc.c.Dyn.Resource(harness.GVRModelRoute).Namespace(harness.TeamControlNS).Delete(sc.ctx, r.name, metav1.DeleteOptions{})
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
