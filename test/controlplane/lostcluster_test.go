package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelplaneai/function-inference-gateway/internal/route"
)

// lostRoute names the ModelRoute scenario 5d puts on the second gateway,
// the one that lost the cluster.
const lostRoute = "on-lost-gateway"

// routeOnLostGateway is issue 21's item 4 for a lost cluster: a ModelRoute
// that names the InferenceGateway which lost its cluster says so,
// GatewayLostCluster, and does not spin. Its gateway's condition and the
// cluster's gateway-status ConfigMap disagree for good (the ConfigMap is
// the winner's, True), and only a person's act ends that, so the route is
// looked at again every 10 s (route.StuckGatewayRequeue), not every
// second: over a minute, Crossplane calls the function for it about once
// per 10 s, give or take a few watch events.
func (sc *scenarios) routeOnLostGateway(t *testing.T) {
	t.Helper()
	c := sc.c
	r := plainRoute(lostRoute, "lost."+teamControlNS+".svc.cluster.local")
	spec := r.Object["spec"].(map[string]any)
	spec["gatewayName"] = secondXRName
	c.apply(sc.ctx, r)
	sc.eventually(t, waitRoute, "the ModelRoute on the lost gateway to say GatewayLostCluster", func(ctx context.Context) string {
		u, err := sc.get(ctx, gvrModelRoute, teamControlNS, lostRoute)
		if err != nil {
			return err.Error()
		}
		if st, rs := conditionStatus(u, route.ConditionType), conditionReason(u, route.ConditionType); st != "False" || rs != route.ReasonGatewayLostCluster {
			return fmt.Sprintf("RoutingReady=%s (%s): %v", st, rs, condition(u, route.ConditionType)["message"])
		}
		return ""
	})
	u, _ := sc.get(sc.ctx, gvrModelRoute, teamControlNS, lostRoute)
	msg := fmt.Sprint(condition(u, route.ConditionType)["message"])
	if !strings.Contains(msg, secondXRName) {
		t.Errorf("RoutingReady's message does not name the gateway %q: %s", secondXRName, msg)
	}
	t.Logf("scenario 5d: the ModelRoute on the gateway that lost its cluster: RoutingReady=False (%s): %s", route.ReasonGatewayLostCluster, msg)

	// Let its creation's events pass, then count the calls.
	time.Sleep(20 * time.Second)
	from := time.Now()
	const window = 60 * time.Second
	time.Sleep(window)
	calls := c.functionCallTimes("ModelRoute", lostRoute, from, from.Add(window))
	// Six looks at 10 s, and four for watch events: the route's Objects
	// may still change now and then (its AIGatewayRoute names a parent
	// Gateway that is not on the cluster, which AI Gateway retries with a
	// growing back-off, writing its status each time). A spin at 2 s
	// would be thirty.
	if limit := int(window/route.StuckGatewayRequeue) + 4; len(calls) > limit {
		t.Errorf("Crossplane called the function %d times in %s for the ModelRoute on the lost gateway, want at most %d (every %s): %v",
			len(calls), window, limit, route.StuckGatewayRequeue, calls)
	}
	t.Logf("scenario 5d: %d calls for the ModelRoute on the lost gateway in %s", len(calls), window)
	sc.deleteRoute(t, lostRoute, "scenario 5d deletes its ModelRoute on the lost gateway")
}

// functionCallTimes returns when the function composed the XR of kind
// and name between from and to, by its log.
func (c *cluster) functionCallTimes(kind, name string, from, to time.Time) []string {
	b, err := os.ReadFile(filepath.Join(c.ps.logDir, "function.log"))
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for l := range strings.SplitSeq(string(b), "\n") {
		if !strings.Contains(l, "\tComposed\t") || !strings.Contains(l, `"xr-kind": "`+kind+`"`) || !strings.Contains(l, `"xr-name": "`+name+`"`) {
			continue
		}
		ts, _, _ := strings.Cut(l, "\t")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err == nil && !at.Before(from) && at.Before(to) {
			out = append(out, at.Format("15:04:05.000"))
		}
	}
	return out
}
