package fn

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/route"
)

// statusObject is the ModelRoute's observed gateway-status Object: the
// ConfigMap the gateway publishes GatewayReady in, live unless synced is
// false.
func statusObject(ready, reason string, synced bool) obj {
	return object("gateway-status", obj{"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj{"name": "inference-gateway-status"},
		"data": obj{"gatewayReady": ready, "reason": reason}}, synced, true)
}

// observedRouteWithStatus is every route Object observed, with status as
// the gateway-status Object, or without one when status is nil.
func observedRouteWithStatus(status obj) map[string]obj {
	o := observedRoute(true)
	if status == nil {
		delete(o, "gateway-status")
	} else {
		o["gateway-status"] = status
	}
	return o
}

// TestRoutingFollowsPublishedGatewayStatus checks that a ModelRoute takes
// its gateway's verdict from the gateway-status ConfigMap it watches when
// it sees it live, before the InferenceGateway's own condition, and that
// while it waits only for a gateway it watches it asks for no early
// reconcile.
func TestRoutingFollowsPublishedGatewayStatus(t *testing.T) {
	ab := []obj{backend("a", 1, 1, "key-a"), backend("b", 0, 1, "")}
	with := observedRouteWithStatus
	cases := map[string]struct {
		reason   string
		gateway  []obj
		observed map[string]obj
		want     string
		message  string
		ttl      time.Duration
	}{
		"BothReady": {
			reason:   "Both say ready: route.",
			gateway:  gwReady,
			observed: with(statusObject("True", "Serving", true)),
			want:     "RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted",
			ttl:      route.ReadyRequeue,
		},
		"BothNotReady": {
			reason:   "Both say the gateway rolls out: wait, quoting its reason, and let the ConfigMap's watch, not the TTL, bring the end.",
			gateway:  gwRolling,
			observed: with(statusObject("False", "OldReplicasPresent", true)),
			want:     "RoutingReady=STATUS_CONDITION_FALSE/WaitingForGateway",
			message:  "(OldReplicasPresent)",
			ttl:      route.WatchedGatewayRequeue,
		},
		"GatewayAndRoute": {
			reason:  "Waiting for the gateway and for AI Gateway's verdict on the route: the ConfigMap's watch wakes the ModelRoute for only one of them, so look again in 2 s, backing off.",
			gateway: gwRolling,
			observed: func() map[string]obj {
				o := with(statusObject("False", "OldReplicasPresent", true))
				o["route"] = routedObject(false, "qwen-b", "qwen-a")
				return o
			}(),
			want:    "RoutingReady=STATUS_CONDITION_FALSE/WaitingForGateway",
			message: "Also:",
			ttl:     2 * time.Second,
		},
		"ConfigMapAhead": {
			reason:   "The ConfigMap already says ready, Crossplane has not written the InferenceGateway's status yet: GatewayStatusStale until both agree, and look again in 2 s, since no event will announce the status.",
			gateway:  gwRolling,
			observed: with(statusObject("True", "Serving", true)),
			want:     "RoutingReady=STATUS_CONDITION_FALSE/GatewayStatusStale",
			message:  "(OldReplicasPresent)",
			ttl:      2 * time.Second,
		},
		"ConfigMapBehind": {
			reason:   "The InferenceGateway says ready, the ConfigMap not yet: a slow provider must not make the ModelRoute ready early, nor keep it ready late; GatewayStatusStale names the two.",
			gateway:  gwReady,
			observed: with(statusObject("False", "OldReplicasPresent", true)),
			want:     "RoutingReady=STATUS_CONDITION_FALSE/GatewayStatusStale",
			message:  "gateway-status ConfigMap on the gateway cluster says gatewayReady=False (OldReplicasPresent)",
			ttl:      2 * time.Second,
		},
		"NotPublished": {
			reason:   "No ConfigMap observed (a gateway composed by an older version): the InferenceGateway's condition decides, and the ModelRoute looks again soon.",
			gateway:  gwRolling,
			observed: with(nil),
			want:     "RoutingReady=STATUS_CONDITION_FALSE/WaitingForGateway",
			message:  "(OldReplicasPresent)",
			ttl:      2 * time.Second,
		},
		"StalePublished": {
			reason:   "The Object's last look failed: its old data is no evidence; the InferenceGateway's condition decides.",
			gateway:  gwRolling,
			observed: with(statusObject("True", "Serving", false)),
			want:     "RoutingReady=STATUS_CONDITION_FALSE/WaitingForGateway",
			ttl:      2 * time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, newRequest(t, routeXR(ab...), tc.observed, map[string][]obj{"gateway": tc.gateway, "secret-key-a": keyA}))
			if diff := cmp.Diff([]string{tc.want}, summarize(rsp).Conditions); diff != "" {
				t.Errorf("%s\nconditions: -want, +got:\n%s", tc.reason, diff)
			}
			if msg := condition(rsp, "RoutingReady").GetMessage(); !strings.Contains(msg, tc.message) {
				t.Errorf("%s\nRoutingReady message %q does not contain %q", tc.reason, msg, tc.message)
			}
			if diff := cmp.Diff(tc.ttl, rsp.GetMeta().GetTtl().AsDuration()); diff != "" {
				t.Errorf("%s\nTTL: -want, +got:\n%s", tc.reason, diff)
			}
			st := rsp.GetDesired().GetResources()["gateway-status"].GetResource().AsMap()["spec"].(obj)
			if st["watch"] != true || !cmp.Equal(st["managementPolicies"], []any{"Observe"}) {
				t.Errorf("%s\nthe gateway-status Object must be observe-only and watched: %v", tc.reason, st)
			}
		})
	}
}

// TestGatewayPublishesItsStatus checks the ConfigMap the InferenceGateway
// publishes: GatewayReady's status and reason, what a route reads of the
// gateway's spec (its listener, its client certificate), and nothing that changes
// more often (the message carries rollout counters); and, from the first
// reconcile that reports GatewayReady after one that could not, when that
// was, so that the ConfigMap changes and wakes the ModelRoutes.
func TestGatewayPublishesItsStatus(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rolled, rolling := deploymentManifest(2, 2, true, 2, 2, 2), deploymentManifest(3, 3, true, 3, 1, 2)
	reporting := gatewayTrueSince(now.Add(-time.Hour))
	failed := gatewayWithCondition(now.Add(-time.Hour), "Unknown", "FatalError")
	// published is the observed gateway-status Object as the gateway
	// composed it before, with reportingSince at.
	published := func(dep obj, at string) map[string]obj {
		o := observedGateway("203.0.113.10", true, dep, true)
		o["gateway-status"] = object("gateway-status", obj{"apiVersion": "v1", "kind": "ConfigMap"}, true, true)
		o["gateway-status"]["spec"].(obj)["forProvider"] = obj{"manifest": obj{"apiVersion": "v1", "kind": "ConfigMap", "data": obj{"gatewayReady": "True", "reason": "Serving", "reportingSince": at}}}
		return o
	}
	cases := map[string]struct {
		reason   string
		xr       obj
		observed map[string]obj
		want     obj
		required map[string][]obj
		// wantKeys, when set, are checked instead of want: only these keys.
		wantKeys obj
	}{
		"Ready": {
			reason:   "GatewayReady True: its status and reason.",
			xr:       reporting,
			observed: observedGateway("203.0.113.10", true, rolled, true),
			want:     obj{"gatewayReady": "True", "reason": "Serving", "listener": "http", "clientCertificate": "false"},
		},
		"Rolling": {
			reason:   "GatewayReady False: its status and reason, not the counters.",
			xr:       reporting,
			observed: observedGateway("203.0.113.10", true, rolling, true),
			want:     obj{"gatewayReady": "False", "reason": "OldReplicasPresent", "listener": "http", "clientCertificate": "false"},
		},
		"FirstReconcile": {
			reason:   "No GatewayReady yet: the gateway reports from now.",
			xr:       gatewayXR(nil),
			observed: observedGateway("203.0.113.10", true, rolled, true),
			want:     obj{"gatewayReady": "True", "reason": "Serving", "reportingSince": "2026-12-01T12:00:00Z", "listener": "http", "clientCertificate": "false"},
		},
		"ReportsAgain": {
			reason:   "The last reconcile failed (GatewayReady Unknown, FatalError) while the ConfigMap said True: the ConfigMap changes though the verdict does not.",
			xr:       failed,
			observed: published(rolled, "2026-11-30T08:00:00Z"),
			want:     obj{"gatewayReady": "True", "reason": "Serving", "reportingSince": "2026-12-01T12:00:00Z", "listener": "http", "clientCertificate": "false"},
		},
		"TLS": {
			reason:   "What a route reads of the gateway's spec is published too, so that turning TLS on wakes every route: routes attach to https.",
			xr:       withStatusOf(reporting, gatewayXR(tlsSpec)),
			observed: observedGateway("203.0.113.10", true, rolled, true),
			required: map[string][]obj{"tls-secret-llm-tls": {tlsSecret(true, true)}},
			wantKeys: obj{"listener": "https", "clientCertificate": "false"},
		},
		"ClientCertificate": {
			reason:   "And turning the client certificate on wakes them too: their backends may require it.",
			xr:       withStatusOf(reporting, gatewayXR(issuerClientCertSpec)),
			observed: observedGateway("203.0.113.10", true, rolled, true),
			wantKeys: obj{"listener": "http", "clientCertificate": "true"},
		},
		"Carried": {
			reason:   "Reporting, as before: the time published before is carried, so the ConfigMap does not change.",
			xr:       reporting,
			observed: published(rolled, "2026-11-30T08:00:00Z"),
			want:     obj{"gatewayReady": "True", "reason": "Serving", "reportingSince": "2026-11-30T08:00:00Z", "listener": "http", "clientCertificate": "false"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newAt(now)
			rsp, err := f.RunFunction(t.Context(), newRequest(t, tc.xr, tc.observed, tc.required))
			if err != nil {
				t.Fatal(err)
			}
			m := manifest(rsp, "gateway-status")
			if tc.wantKeys != nil {
				data, _ := m["data"].(obj)
				got := obj{}
				for k := range tc.wantKeys {
					got[k] = data[k]
				}
				if diff := cmp.Diff(tc.wantKeys, got); diff != "" {
					t.Errorf("%s\ngateway-status data: -want, +got:\n%s", tc.reason, diff)
				}
				return
			}
			if diff := cmp.Diff(tc.want, m["data"]); diff != "" {
				t.Errorf("%s\ngateway-status data: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(obj{"name": "inference-gateway-status", "namespace": "modelplane-system"}, m["metadata"]); diff != "" {
				t.Errorf("%s\ngateway-status metadata: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestRouteRequeueWhileWatchesHeldBack checks that a ModelRoute whose
// watch events Crossplane's circuit breaker holds back (Responsive=False,
// WatchCircuitOpen) looks every second while its gateway rolls out, for
// compose.FastFor, and otherwise as long after as it has waited, from 2 s
// to the breaker's half-open 30 s; and that a closed circuit leaves it to
// the watches.
func TestRouteRequeueWhileWatchesHeldBack(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ab := []obj{backend("a", 1, 1, "key-a"), backend("b", 0, 1, "")}
	xr := func(open bool, falseSince time.Duration) obj {
		r := routeXR(ab...)
		responsive := obj{"type": "Responsive", "status": "True", "reason": "WatchCircuitClosed", "lastTransitionTime": now.Add(-time.Hour).Format(time.RFC3339)}
		if open {
			responsive = obj{"type": "Responsive", "status": "False", "reason": "WatchCircuitOpen", "lastTransitionTime": now.Add(-time.Minute).Format(time.RFC3339)}
		}
		r["status"] = obj{"notReadySince": now.Add(-falseSince).Format(time.RFC3339), "conditions": []any{responsive,
			obj{"type": "RoutingReady", "status": "False", "reason": "WaitingForGateway", "lastTransitionTime": now.Add(-falseSince).Format(time.RFC3339)}}}
		return r
	}
	xrOpenSince := func(at time.Time) obj {
		r := xr(true, 10*time.Second)
		r["status"].(obj)["conditions"].([]any)[0].(obj)["lastTransitionTime"] = at.Format(time.RFC3339)
		return r
	}
	observed := func() map[string]obj {
		o := observedRoute(true)
		o["gateway-status"] = statusObject("False", "OldReplicasPresent", true)
		return o
	}
	// A gateway that waits for something else than its rollout.
	gwListeners := []obj{inferenceGateway(false, "ListenersNotProgrammed", false)}
	cases := map[string]struct {
		reason  string
		xr      obj
		gateway []obj
		want    time.Duration
	}{
		"RolloutHeldBackJustNow": {"The circuit is open, the gateway rolls out, the route has waited 1 s: every second.", xr(true, time.Second), gwRolling, compose.FollowTTL},
		"RolloutHeldBackFor1m":   {"... and still after a minute.", xr(true, time.Minute), gwRolling, compose.FollowTTL},
		"RolloutHeldBackFor5m":   {"Waiting for a rollout for 5 minutes, past compose.FastFor: back off to the breaker's half-open interval.", xr(true, 5*time.Minute), gwRolling, compose.HeldBackBackoff.Max},
		"HeldBackJustNow":        {"The circuit is open, the gateway waits for its listeners, the route has waited 1 s: 2 s, the back-off's first step.", xr(true, time.Second), gwListeners, 2 * time.Second},
		"HeldBackFor10s":         {"... and has waited 10 s: as long again.", xr(true, 10*time.Second), gwListeners, 10 * time.Second},
		"HeldBackFor20m":         {"Open, and waiting for 20 minutes: no slower than the half-open interval.", xr(true, 20*time.Minute), gwListeners, compose.HeldBackBackoff.Max},
		"WatchesFlowing":         {"Closed: the gateway-status watch will wake the route; rest.", xr(false, 10*time.Second), gwRolling, route.WatchedGatewayRequeue},
		"OpenLongAgo":            {"Responsive has said False for 10 minutes: Crossplane closes the breaker only on the next event, which passes after the 5-minute cooldown; rest.", xrOpenSince(now.Add(-10 * time.Minute)), gwRolling, route.WatchedGatewayRequeue},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newAt(now)
			obs := observed()
			obs["gateway-status"] = statusObject("False", tc.gateway[0]["status"].(obj)["conditions"].([]any)[0].(obj)["reason"].(string), true)
			rsp, err := f.RunFunction(t.Context(), newRequest(t, tc.xr, obs, map[string][]obj{"gateway": tc.gateway, "secret-key-a": keyA}))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, rsp.GetMeta().GetTtl().AsDuration()); diff != "" {
				t.Errorf("%s\nTTL: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestReadyAgreesWithRoutingReady checks that the ModelRoute's Ready, as
// Crossplane derives it, agrees with RoutingReady when the gateway-status
// ConfigMap has never been found: after an upgrade from a version that
// did not publish it, until the gateway's next reconcile does. Crossplane
// takes an XR's readiness from the function when it sets it, and
// otherwise from every composed resource's
// (internal/controller/apiextensions/composite/reconciler.go, Reconcile).
func TestReadyAgreesWithRoutingReady(t *testing.T) {
	ab := []obj{backend("a", 1, 1, "key-a"), backend("b", 0, 1, "")}
	// notFound is the gateway-status Object once provider-kubernetes has
	// looked for the ConfigMap and not found it: not Synced, no manifest.
	notFound := object("gateway-status", nil, false, false)
	notFound["status"] = obj{"conditions": []any{cond("Synced", false, "ReconcileError", "cannot observe external resource: external resource does not exist")}}
	with := observedRouteWithStatus
	cases := map[string]struct {
		reason   string
		gateway  []obj
		observed map[string]obj
		want     bool
	}{
		"NotFoundGatewayReady": {
			reason:   "The ConfigMap does not exist yet and the InferenceGateway is GatewayReady: RoutingReady follows the InferenceGateway, and Ready with it.",
			gateway:  gwReady,
			observed: with(notFound),
			want:     true,
		},
		"NotComposedGatewayReady": {
			reason:   "The ModelRoute was composed by a version without the gateway-status Object, which does not exist yet: the same.",
			gateway:  gwReady,
			observed: with(nil),
			want:     true,
		},
		"NotFoundGatewayRolling": {
			reason:   "The ConfigMap does not exist yet and the gateway rolls out: both False.",
			gateway:  gwRolling,
			observed: with(notFound),
			want:     false,
		},
		"FoundGatewayReady": {
			reason:   "The ConfigMap is published and agrees: both True.",
			gateway:  gwReady,
			observed: with(statusObject("True", "Serving", true)),
			want:     true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, newRequest(t, routeXR(ab...), tc.observed, map[string][]obj{"gateway": tc.gateway, "secret-key-a": keyA}))
			routing := condition(rsp, "RoutingReady").GetStatus() == fnv1.Status_STATUS_CONDITION_TRUE
			s := summarize(rsp)
			ready := s.XRReady == fnv1.Ready_READY_TRUE.String()
			if s.XRReady == fnv1.Ready_READY_UNSPECIFIED.String() {
				ready = true
				for _, r := range s.Resources {
					ready = ready && r == fnv1.Ready_READY_TRUE.String()
				}
			}
			if diff := cmp.Diff(map[string]bool{"Ready": tc.want, "RoutingReady": tc.want}, map[string]bool{"Ready": ready, "RoutingReady": routing}); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s\nresources: %v", tc.reason, diff, s.Resources)
			}
		})
	}
}

// withStatusOf is xr with the status of from.
func withStatusOf(from, xr obj) obj {
	xr["status"] = from["status"]
	return xr
}

// TestRouteNeverFollowsAnOlderGatewayVerdict checks that a ModelRoute
// never goes back to a GatewayReady verdict older than the one its status
// says it followed: Crossplane's cached copy of the InferenceGateway can lag
// (and Crossplane re-applies its cached conditions at the start of every
// gateway reconcile), and a route that read an old True while both of its
// inputs lagged said RoutingReady=True through its gateway's outage.
func TestRouteNeverFollowsAnOlderGatewayVerdict(t *testing.T) {
	ab := []obj{backend("a", 1, 1, "key-a"), backend("b", 0, 1, "")}
	const (
		t1 = "2026-12-04T10:00:00Z" // the gateway became ready
		t2 = "2026-12-04T10:05:00Z" // its outage began
		t3 = "2026-12-04T10:07:00Z" // it was ready again
	)
	gw := func(ready bool, reason, since, uid string) []obj {
		g := inferenceGateway(ready, reason, false)
		g["metadata"].(obj)["uid"] = uid
		g["status"].(obj)["conditions"].([]any)[0].(obj)["lastTransitionTime"] = since
		return []obj{g}
	}
	followed := func(ready bool, since, uid string) obj {
		return obj{"name": "inference-gateway", "uid": uid, "ready": ready, "since": since}
	}
	cases := map[string]struct {
		reason   string
		followed obj
		gateway  []obj
		status   obj
		want     string
		message  string
		ttl      time.Duration
		record   obj
	}{
		"OlderTrueAfterOutage": {
			reason:   "The route followed the outage (False since t2); a copy of the gateway still True since t1, and a ConfigMap that still says True, must not make it ready: GatewayStatusStale, look again in 2 s, and keep the record.",
			followed: followed(false, t2, "gw-1"),
			gateway:  gw(true, "Serving", t1, "gw-1"),
			status:   statusObject("True", "Serving", true),
			want:     "RoutingReady=STATUS_CONDITION_FALSE/GatewayStatusStale",
			message:  "older than the GatewayReady=False since " + t2,
			ttl:      2 * time.Second,
			record:   followed(false, t2, "gw-1"),
		},
		"NewerTrue": {
			reason:   "The gateway is ready again since t3, after the outage the route followed: route, and record t3.",
			followed: followed(false, t2, "gw-1"),
			gateway:  gw(true, "Serving", t3, "gw-1"),
			status:   statusObject("True", "Serving", true),
			want:     "RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted",
			ttl:      route.ReadyRequeue,
			record:   followed(true, t3, "gw-1"),
		},
		"SameVerdict": {
			reason:   "The verdict the route followed, read again: it stands.",
			followed: followed(true, t1, "gw-1"),
			gateway:  gw(true, "Serving", t1, "gw-1"),
			status:   statusObject("True", "Serving", true),
			want:     "RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted",
			ttl:      route.ReadyRequeue,
			record:   followed(true, t1, "gw-1"),
		},
		"RecreatedGateway": {
			reason:   "A gateway of the same name but another uid has a history of its own: its older time is no evidence of a stale copy.",
			followed: followed(false, t2, "gw-1"),
			gateway:  gw(true, "Serving", t1, "gw-2"),
			status:   statusObject("True", "Serving", true),
			want:     "RoutingReady=STATUS_CONDITION_TRUE/RouteAccepted",
			ttl:      route.ReadyRequeue,
			record:   followed(true, t1, "gw-2"),
		},
		"RefusedWhileServing": {
			reason:   "The gateway the route followed ready refuses its spec: what it composed serves on, but nothing judges its rollout, so the route waits, and says why.",
			followed: followed(true, t1, "gw-1"),
			gateway:  gw(false, "SpecRefused", t2, "gw-1"),
			status:   statusObject("False", "SpecRefused", true),
			want:     "RoutingReady=STATUS_CONDITION_FALSE/WaitingForGateway",
			message:  `the InferenceGateway "inference-gateway" is not GatewayReady (SpecRefused): the gateway says SpecRefused; it keeps serving what it composed, this model's route among them, but its readiness is not judged until its spec is fixed`,
			ttl:      route.WatchedGatewayRequeue,
			record:   followed(false, t2, "gw-1"),
		},
		"FirstLook": {
			reason:  "Nothing followed yet: the verdict read is followed and recorded.",
			gateway: gw(false, "OldReplicasPresent", t2, "gw-1"),
			status:  statusObject("False", "OldReplicasPresent", true),
			want:    "RoutingReady=STATUS_CONDITION_FALSE/WaitingForGateway",
			ttl:     route.WatchedGatewayRequeue,
			record:  followed(false, t2, "gw-1"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			xr := routeXR(ab...)
			if tc.followed != nil {
				xr["status"] = obj{"followedGateway": tc.followed}
			}
			rsp := run(t, newRequest(t, xr, observedRouteWithStatus(tc.status), map[string][]obj{"gateway": tc.gateway, "secret-key-a": keyA}))
			if diff := cmp.Diff([]string{tc.want}, summarize(rsp).Conditions); diff != "" {
				t.Errorf("%s\nconditions: -want, +got:\n%s", tc.reason, diff)
			}
			if msg := condition(rsp, "RoutingReady").GetMessage(); !strings.Contains(msg, tc.message) {
				t.Errorf("%s\nRoutingReady message %q does not contain %q", tc.reason, msg, tc.message)
			}
			if diff := cmp.Diff(tc.ttl, rsp.GetMeta().GetTtl().AsDuration()); diff != "" {
				t.Errorf("%s\nTTL: -want, +got:\n%s", tc.reason, diff)
			}
			st, _ := rsp.GetDesired().GetComposite().GetResource().AsMap()["status"].(obj)
			if diff := cmp.Diff(tc.record, st["followedGateway"]); diff != "" {
				t.Errorf("%s\nstatus.followedGateway: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
