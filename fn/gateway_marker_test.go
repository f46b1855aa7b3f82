package fn

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/rollout"
)

// progressed gives an observed Deployment manifest the Deployment
// controller's Progressing condition, last updated at.
func progressed(dep obj, reason string, at time.Time) obj {
	ts := at.UTC().Format(time.RFC3339)
	dep["status"].(obj)["conditions"] = []any{
		obj{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "lastUpdateTime": ts, "lastTransitionTime": ts},
		obj{"type": "Progressing", "status": "True", "reason": reason, "lastUpdateTime": ts, "lastTransitionTime": ts},
	}
	return dep
}

// templateAnnotated puts an annotation on the Deployment's pod template.
func templateAnnotated(dep obj, k, v string) obj {
	md := dep["spec"].(obj)["template"].(obj)["metadata"].(obj)
	a, _ := md["annotations"].(obj)
	if a == nil {
		a = obj{}
		md["annotations"] = a
	}
	a[k] = v
	return dep
}

// envoyProxyComposedWith is the observed envoy-proxy Object whose applied
// manifest (what the function composed before) carries the function's
// marker.
func envoyProxyComposedWith(marker string) obj {
	o := object("envoy-proxy", plainManifest("EnvoyProxy"), true, true)
	o["spec"].(obj)["forProvider"] = obj{"manifest": obj{
		"apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "EnvoyProxy", "metadata": obj{"name": "inference-gateway", "namespace": "modelplane-system"},
		"spec": obj{"provider": obj{"type": "Kubernetes", "kubernetes": obj{"envoyDeployment": obj{"pod": obj{"annotations": obj{rollout.VerifiedMarker: marker}}}}}},
	}}
	return o
}

// composedMarker is the function's marker on the EnvoyProxy it composed.
func composedMarker(rsp *fnv1.RunFunctionResponse) string {
	ep := manifest(rsp, "envoy-proxy")
	spec, _ := ep["spec"].(obj)
	p, _ := spec["provider"].(obj)
	k, _ := p["kubernetes"].(obj)
	d, _ := k["envoyDeployment"].(obj)
	pod, _ := d["pod"].(obj)
	a, _ := pod["annotations"].(obj)
	v, _ := a[rollout.VerifiedMarker].(string)
	return v
}

// TestOwnExtProcMarker covers the function's own ext-proc marker: when it
// writes it (AI Gateway v1.0.0 whose first Envoy pods already had the
// sidecar), when it must not, and that once written it is carried
// forward unchanged.
func TestOwnExtProcMarker(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const earlier = "2026-12-01T11:00:00Z"
	noMarker := func() obj { return deploymentManifest(1, 1, false, 2, 2, 2) }
	gw := func(anchor bool, dep obj, synced bool, extra map[string]obj) map[string]obj {
		o := observedGateway("203.0.113.10", anchor, dep, synced)
		maps.Copy(o, extra)
		return o
	}
	written := &fnv1.Result{
		Severity: fnv1.Severity_SEVERITY_NORMAL,
		Target:   fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum(),
		Message: `the function set its own ext-proc marker modelplane.ai/ext-proc-verified=2026-12-01T12:00:00Z on the EnvoyProxy "inference-gateway", which rolls the Envoy Deployment "envoy-modelplane-system-inference-gateway" once: ` +
			`the Deployment completed its rollout at 2026-12-01T11:59:45Z with the anchor AIGatewayRoute "inference-gateway-anchor" accepted, and AI Gateway wrote no ext-proc marker on its pod template in the 15s since ` +
			`(v1.0.0 writes one only when the pods' sidecar state disagrees with its routes). The new pods are created after AI Gateway accepted the anchor and saw the Deployment, so its webhook gives each of them the sidecar`,
	}
	type want struct {
		// marker is the function's marker on the composed EnvoyProxy.
		marker string
		// condition is GatewayReady as "STATUS/Reason".
		condition string
		// message must contain each of these.
		message []string
		// results are the Normal results besides the open-gateway one.
		results []*fnv1.Result
		// ttlAtMost bounds the response TTL.
		ttlAtMost time.Duration
	}
	cases := map[string]struct {
		reason string
		xr     obj
		obs    map[string]obj
		want   want
	}{
		"SettleTimeNotReached": {
			reason: "The rollout completed 12 s ago with the anchor accepted and no marker: wait until 15 s have passed, say when, and come back no later than that, even when the back-off is slower.",
			xr:     gatewayWithCondition(now.Add(-5*time.Minute), "False", "ExtProcMarkerMissing"),
			obs:    gw(true, progressed(noMarker(), "NewReplicaSetAvailable", now.Add(-12*time.Second)), true, nil),
			want: want{
				condition: "STATUS_CONDITION_FALSE/ExtProcMarkerMissing",
				message:   []string{"aigateway.envoyproxy.io/extproc-config-hash, aigateway.envoyproxy.io/uuid", "the function will roll the Envoy pods itself at 2026-12-01T12:00:03Z", "modelplane.ai/ext-proc-verified"},
				ttlAtMost: 3 * time.Second,
			},
		},
		"SettleTimeReached": {
			reason: "The rollout completed 15 s ago, the anchor is accepted, AI Gateway wrote no marker: the function writes its own, valued now, and says why.",
			obs:    gw(true, progressed(noMarker(), "NewReplicaSetAvailable", now.Add(-15*time.Second)), true, nil),
			want: want{
				marker:    "2026-12-01T12:00:00Z",
				condition: "STATUS_CONDITION_FALSE/ExtProcMarkerMissing",
				message:   []string{"the function has set its own marker modelplane.ai/ext-proc-verified=2026-12-01T12:00:00Z on the EnvoyProxy \"inference-gateway\""},
				results:   []*fnv1.Result{written},
				ttlAtMost: time.Second,
			},
		},
		"AnchorNotAccepted": {
			reason: "Without the anchor accepted, the webhook may not give new pods the sidecar: no marker.",
			obs:    gw(false, progressed(noMarker(), "NewReplicaSetAvailable", now.Add(-time.Hour)), true, nil),
			want:   want{condition: "STATUS_CONDITION_FALSE/AnchorNotAccepted", message: []string{"once the anchor route is accepted"}},
		},
		"RolloutIncomplete": {
			reason: "Old pods still count: the rollout rule fails more than the marker, so no marker.",
			obs:    gw(true, progressed(deploymentManifest(3, 3, false, 3, 1, 2), "NewReplicaSetAvailable", now.Add(-time.Hour)), true, nil),
			want:   want{condition: "STATUS_CONDITION_FALSE/ExtProcMarkerMissing", message: []string{"once every other clause of the rollout rule holds", "1 of 3 replicas run the current template"}},
		},
		"GenerationNotObserved": {
			reason: "A Progressing condition of an older generation is no evidence about the current template.",
			obs:    gw(true, progressed(deploymentManifest(2, 1, false, 2, 2, 2), "NewReplicaSetAvailable", now.Add(-time.Hour)), true, nil),
			want:   want{condition: "STATUS_CONDITION_FALSE/GenerationNotObserved", message: []string{"once every other clause of the rollout rule holds"}},
		},
		"ProgressingMissing": {
			reason: "No Progressing condition: no record that the rollout completed, no marker.",
			obs:    gw(true, noMarker(), true, nil),
			want:   want{condition: "STATUS_CONDITION_FALSE/ExtProcMarkerMissing", message: []string{"once the Deployment reports its Progressing condition"}},
		},
		"ProgressingOtherReason": {
			reason: "Progressing says the ReplicaSet is still being updated: no marker.",
			obs:    gw(true, progressed(noMarker(), "ReplicaSetUpdated", now.Add(-time.Hour)), true, nil),
			want:   want{condition: "STATUS_CONDITION_FALSE/ExtProcMarkerMissing", message: []string{"once the Deployment's Progressing condition says NewReplicaSetAvailable (now ReplicaSetUpdated)"}},
		},
		"HashMarkerPresent": {
			reason: "AI Gateway v1.1.0's hash is there: the gateway is ready and the function never writes its own.",
			obs:    gw(true, progressed(deploymentManifest(1, 1, true, 2, 2, 2), "NewReplicaSetAvailable", now.Add(-time.Hour)), true, nil),
			want:   want{condition: "STATUS_CONDITION_TRUE/Serving"},
		},
		"UUIDMarkerPresent": {
			reason: "AI Gateway v1.0.0's uuid is there (its first pods lacked the sidecar): ready, no extra roll.",
			obs:    gw(true, templateAnnotated(progressed(noMarker(), "NewReplicaSetAvailable", now.Add(-time.Hour)), "aigateway.envoyproxy.io/uuid", "5d2e"), true, nil),
			want:   want{condition: "STATUS_CONDITION_TRUE/Serving"},
		},
		"AlreadyWrittenNotYetInTemplate": {
			reason: "Written before, Envoy Gateway has not copied it into the template yet: carried unchanged, no second result.",
			obs:    gw(true, progressed(noMarker(), "NewReplicaSetAvailable", now.Add(-time.Hour)), true, map[string]obj{"envoy-proxy": envoyProxyComposedWith(earlier)}),
			want:   want{marker: earlier, condition: "STATUS_CONDITION_FALSE/ExtProcMarkerMissing", message: []string{"Envoy Gateway has not yet copied the function's own marker modelplane.ai/ext-proc-verified=" + earlier}},
		},
		"AlreadyWrittenDeploymentGone": {
			reason: "The Deployment is gone (the Object is not Synced): the marker is carried unchanged.",
			obs:    gw(true, templateAnnotated(noMarker(), rollout.VerifiedMarker, earlier), false, map[string]obj{"envoy-proxy": envoyProxyComposedWith(earlier)}),
			want:   want{marker: earlier, condition: "STATUS_CONDITION_FALSE/DeploymentNotObserved"},
		},
		"AlreadyWrittenDeploymentRecreated": {
			reason: "Envoy Gateway re-created the Deployment from the EnvoyProxy, with the marker, and it is rolling out: carried unchanged, never rewritten.",
			obs:    gw(true, progressed(templateAnnotated(deploymentManifest(1, 1, false, 2, 2, 0), rollout.VerifiedMarker, earlier), "ReplicaSetUpdated", now), true, map[string]obj{"envoy-proxy": envoyProxyComposedWith(earlier)}),
			want:   want{marker: earlier, condition: "STATUS_CONDITION_FALSE/NoReplicaAvailable"},
		},
		"WrittenAndRolledOut": {
			reason: "The template has the function's marker and is rolled out: GatewayReady True, the marker carried.",
			obs:    gw(true, progressed(templateAnnotated(noMarker(), rollout.VerifiedMarker, earlier), "NewReplicaSetAvailable", now.Add(-time.Hour)), true, map[string]obj{"envoy-proxy": envoyProxyComposedWith(earlier)}),
			want:   want{marker: earlier, condition: "STATUS_CONDITION_TRUE/Serving"},
		},
		"CarriedFromTemplateAlone": {
			reason: "The EnvoyProxy Object shows no marker (not reported yet), but the template has the function's: carried from there, so the pods do not roll again.",
			obs:    gw(true, progressed(templateAnnotated(noMarker(), rollout.VerifiedMarker, earlier), "NewReplicaSetAvailable", now.Add(-time.Hour)), true, map[string]obj{"envoy-proxy": object("envoy-proxy", nil, false, false)}),
			want:   want{marker: earlier, condition: "STATUS_CONDITION_TRUE/Serving"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			xr := tc.xr
			if xr == nil {
				xr = gatewayXR(nil)
			}
			f := New(logging.NewNopLogger())
			f.now = func() time.Time { return now }
			rsp, err := f.RunFunction(t.Context(), newRequest(t, xr, tc.obs, nil))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want.marker, composedMarker(rsp)); diff != "" {
				t.Errorf("%s\nEnvoyProxy pod annotation %s: -want, +got:\n%s", tc.reason, rollout.VerifiedMarker, diff)
			}
			c := condition(rsp, "GatewayReady")
			if diff := cmp.Diff(tc.want.condition, c.GetStatus().String()+"/"+c.GetReason()); diff != "" {
				t.Errorf("%s\nGatewayReady: -want, +got:\n%s", tc.reason, diff)
			}
			for _, m := range tc.want.message {
				if !strings.Contains(c.GetMessage(), m) {
					t.Errorf("%s\nGatewayReady message %q does not contain %q", tc.reason, c.GetMessage(), m)
				}
			}
			var results []*fnv1.Result
			for _, r := range rsp.GetResults() {
				if "SEVERITY_NORMAL: "+r.GetMessage() != openResult {
					results = append(results, r)
				}
			}
			if diff := cmp.Diff(tc.want.results, results, protocmp.Transform(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nresults: -want, +got:\n%s", tc.reason, diff)
			}
			if tc.want.ttlAtMost > 0 {
				if ttl := rsp.GetMeta().GetTtl().AsDuration(); ttl > tc.want.ttlAtMost || ttl <= 0 {
					t.Errorf("%s\nTTL %s, want above 0 and at most %s", tc.reason, ttl, tc.want.ttlAtMost)
				}
			}
		})
	}
}
