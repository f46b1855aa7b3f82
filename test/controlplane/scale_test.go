package controlplane

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
)

// The scale scenario's size: ModelRoutes on the one gateway, and backends
// in each (the most a model can have).
const (
	scaleRoutes   = 10
	scaleBackends = 16
	// waitScale bounds the wait for every route of the scale scenario.
	waitScale = 12 * time.Minute
)

// scale is scenario 7: ten ModelRoutes of sixteen backends each on the
// gateway. Once all route, the API server's request rate at rest; then a
// template change rolls Envoy, and each route's RoutingReady must follow
// the gateway's GatewayReady back to True. It reports, per route, the
// time from GatewayReady to RoutingReady (max and median) and the request
// rates at rest and during the rollout.
func (sc *scenarios) scale(t *testing.T) {
	c, w, s := sc.c, sc.w, sc.s
	created := time.Now()
	var names []string
	for i := range scaleRoutes {
		name := fmt.Sprintf("scale-%02d", i)
		names = append(names, name)
		c.apply(sc.ctx, scaleRoute(name, i))
	}
	sc.eventually(t, waitScale, fmt.Sprintf("all %d ModelRoutes RoutingReady=True", scaleRoutes), func(ctx context.Context) string {
		var waiting []string
		for _, n := range names {
			r, err := sc.get(ctx, gvrModelRoute, teamControlNS, n)
			if err != nil || conditionStatus(r, "RoutingReady") != "True" {
				waiting = append(waiting, n)
			}
		}
		if len(waiting) > 0 {
			return fmt.Sprintf("%d not routing yet: %v", len(waiting), waiting)
		}
		return ""
	})
	t.Logf("%d ModelRoutes of %d backends each routing %s after they were created", scaleRoutes, scaleBackends, time.Since(created).Round(time.Second))
	sc.sp.record("scale", "routes", scaleRoutes)
	sc.sp.record("scale", "backends-per-route", scaleBackends)
	sc.sp.record("scale", "all-routing-after-creation", seconds(time.Since(created)))

	rest := sc.restPastBreakers(t)
	sc.sp.record("scale", evRateAtRest, rest.total)
	t.Logf("at rest, one gateway and %d models: %s", scaleRoutes, rest)

	start, err := c.countRequests(sc.ctx)
	must(t, err)
	// Another AI Gateway upgrade: a new ext-proc image rolls the Envoy pods.
	c.restartAIGateway(sc.ctx, s.up, extProcImage+"-upgrade.2")
	sc.eventually(t, waitSettle, "GatewayReady=False for the rollout", func(ctx context.Context) string {
		return wantCondition(sc.gatewayXR(ctx), gateway.ConditionType, "False")
	})
	sc.eventually(t, waitSettle, "GatewayReady=True after the rollout", func(ctx context.Context) string {
		return wantCondition(sc.gatewayXR(ctx), gateway.ConditionType, "True")
	})
	gw, _ := w.transitions()
	gr, ok := firstAfter(gw, start.at, "True")
	if !ok {
		t.Fatal("no GatewayReady=True transition after the rollout began")
	}
	sc.eventually(t, waitScale, "every ModelRoute RoutingReady=True after the rollout", func(ctx context.Context) string {
		var waiting []string
		for _, n := range names {
			if _, ok := firstAfter(w.routeTransitions(teamControlNS, n), gr, "True"); !ok && lastStatusBefore(w.routeTransitions(teamControlNS, n), time.Now()) != "True" {
				waiting = append(waiting, n)
			}
		}
		if len(waiting) > 0 {
			return fmt.Sprintf("%d not routing yet: %v", len(waiting), waiting)
		}
		return ""
	})
	end, err := c.countRequests(sc.ctx)
	must(t, err)

	rel := func(at time.Time) float64 { return seconds(at.Sub(start.at)) }
	if at, ok := firstAfter(w.objectTransitions(), start.at, "True"); ok {
		sc.sp.record("scale", evObjectReady, rel(at))
	}
	sc.sp.record("scale", evGatewayReady, rel(gr))
	var lags []float64
	var stayed, wentDown []string
	for _, n := range names {
		ts := w.routeTransitions(teamControlNS, n)
		if _, down := firstAfter(ts, start.at, "False"); !down {
			stayed = append(stayed, n)
			continue
		}
		wentDown = append(wentDown, n)
		at, ok := firstAfter(ts, gr, "True")
		if !ok {
			t.Errorf("ModelRoute %s went RoutingReady=False during the rollout and never came back", n)
			continue
		}
		lags = append(lags, seconds(at.Sub(gr)))
	}
	if len(lags) > 0 {
		slices.Sort(lags)
		sc.sp.record("scale", "routing-ready-after-gateway-max", lags[len(lags)-1])
		sc.sp.record("scale", "routing-ready-after-gateway-median", lags[len(lags)/2])
		t.Logf("RoutingReady after GatewayReady, seconds, for the %d routes that followed the gateway down: %v", len(lags), lags)
	}
	sc.sp.record("scale", "routes-that-followed-the-gateway-down", float64(len(wentDown)))
	if len(stayed) > 0 {
		t.Logf("ModelRoutes whose RoutingReady never left True during the rollout: %s", strings.Join(stayed, ", "))
	}
	r := c.rateBetween(start, end)
	sc.sp.record("scale", evRateRollout, r.total)
	t.Logf("during the rollout: %s over %s", r, end.at.Sub(start.at).Round(time.Second))
	sc.allAccepted(t, "scale")
	w.check(t)
}

// scaleRoute is a ModelRoute of scaleBackends in-cluster backends without
// API keys, in two priority tiers.
func scaleRoute(name string, i int) *unstructured.Unstructured {
	bs := make([]any, scaleBackends)
	for j := range scaleBackends {
		bs[j] = map[string]any{
			"name":     fmt.Sprintf("b%02d", j),
			"endpoint": map[string]any{"hostname": fmt.Sprintf("m%02d-b%02d.%s.svc.cluster.local", i, j, teamControlNS), "port": int64(8000), "tls": false},
			"schema":   map[string]any{"name": "OpenAI"},
			"priority": int64(j % 2),
		}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelRoute",
		"metadata": map[string]any{"name": name, "namespace": teamControlNS},
		"spec":     map[string]any{"gatewayName": gatewayXRName, "backends": bs},
	}}
}
