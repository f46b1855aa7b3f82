package fn

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/testing/protocmp"

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

// filterConfigSeen is the observed filter-config-secret Object: the
// Secret exists (live) or the provider cannot find it (not Synced).
func filterConfigSeen(exists bool) map[string]obj {
	if !exists {
		o := object("filter-config-secret", nil, false, false)
		o["status"] = obj{"conditions": []any{obj{"type": "Synced", "status": "False", "reason": "ReconcileError", "message": "observe failed: external resource does not exist"}}}
		return map[string]obj{"filter-config-secret": o}
	}
	return map[string]obj{"filter-config-secret": object("filter-config-secret", plainManifest("Secret"), true, true)}
}

// sanitizingInput is the Input of a provider that runs with
// --sanitize-secrets.
var sanitizingInput = obj{"apiVersion": "inferencegateway.fn.crossplane.io/v1beta1", "kind": "Input", "providerSanitizesSecrets": true}

// withMarkerRecord is a gateway XR whose status records the function's
// first sight of the rollout completed at completed.
func withMarkerRecord(xr obj, completed, firstSeen time.Time) obj {
	xr["status"] = obj{"extProcMarker": obj{"rolloutCompleted": completed.UTC().Format(time.RFC3339), "firstSeen": firstSeen.UTC().Format(time.RFC3339)}}
	return xr
}

// TestOwnExtProcMarker covers the function's own ext-proc marker: when it
// writes it (AI Gateway v1.0.0 whose first Envoy pods already had the
// sidecar), when it must not, and that once written it is carried
// forward unchanged.
func TestOwnExtProcMarker(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const earlier = "2026-12-01T11:00:00Z"
	noMarker := func() obj { return deploymentManifest(1, 1, false, 2, 2, 2) }
	// gw is the observed gateway, its filter-config Secret present.
	gw := func(anchor bool, dep obj, synced bool, extra map[string]obj) map[string]obj {
		o := observedGateway("203.0.113.10", anchor, dep, synced)
		maps.Copy(o, filterConfigSeen(true))
		maps.Copy(o, extra)
		return o
	}
	completed := now.Add(-15 * time.Second)
	written := &fnv1.Result{
		Severity: fnv1.Severity_SEVERITY_NORMAL,
		Target:   fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum(),
		Message: `the function set its own ext-proc marker modelplane.ai/ext-proc-verified=2026-12-01T11:59:45Z on the EnvoyProxy "inference-gateway", which rolls the Envoy Deployment "envoy-modelplane-system-inference-gateway" once: ` +
			`the Deployment completed its rollout at 2026-12-01T11:59:45Z with the anchor AIGatewayRoute "inference-gateway-anchor" accepted and AI Gateway's filter-config Secret "inference-gateway-modelplane-system" present, and AI Gateway wrote no ext-proc marker on its pod template in the 15s since the function first saw that ` +
			`(v1.0.0 writes one only when the pods' sidecar state disagrees with its routes). The new pods are created after AI Gateway accepted the anchor and created its filter-config Secret, so its webhook gives each of them the sidecar`,
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
		// input is the function Input; nil is sanitizingInput.
		input obj
		want  want
		// record is the status.extProcMarker the response carries.
		record obj
	}{
		"FirstSight": {
			reason: "The rollout completed, the anchor is accepted, the filter-config Secret is there and no marker: the function records its first sight, says when it will write its marker, and comes back no later than that.",
			obs:    gw(true, progressed(noMarker(), "NewReplicaSetAvailable", completed), true, nil),
			want: want{
				condition: "STATUS_CONDITION_FALSE/ExtProcMarkerMissing",
				message:   []string{"aigateway.envoyproxy.io/extproc-config-hash, aigateway.envoyproxy.io/uuid", "the function will roll the Envoy pods itself at 2026-12-01T12:00:15Z", "modelplane.ai/ext-proc-verified"},
				ttlAtMost: 15 * time.Second,
			},
			record: obj{"rolloutCompleted": "2026-12-01T11:59:45Z", "firstSeen": "2026-12-01T12:00:00Z"},
		},
		"ClockAheadOfTheCluster": {
			reason: "By the function's clock the rollout completed an hour ago (its clock runs ahead of the cluster's, or it just started): the settle time still counts from the function's own first sight, not from the cluster's timestamp.",
			obs:    gw(true, progressed(noMarker(), "NewReplicaSetAvailable", now.Add(-time.Hour)), true, nil),
			want: want{
				condition: "STATUS_CONDITION_FALSE/ExtProcMarkerMissing",
				message:   []string{"the function will roll the Envoy pods itself at 2026-12-01T12:00:15Z"},
				ttlAtMost: 15 * time.Second,
			},
			record: obj{"rolloutCompleted": "2026-12-01T11:00:00Z", "firstSeen": "2026-12-01T12:00:00Z"},
		},
		"SettleTimeNotReached": {
			reason: "The function first saw the completed rollout 12 s ago: wait until 15 s have passed, say when, keep the first sight, and come back no later than that, even when the back-off is slower.",
			xr:     withMarkerRecord(gatewayWithCondition(now.Add(-5*time.Minute), "False", "ExtProcMarkerMissing"), completed, now.Add(-12*time.Second)),
			obs:    gw(true, progressed(noMarker(), "NewReplicaSetAvailable", completed), true, nil),
			want: want{
				condition: "STATUS_CONDITION_FALSE/ExtProcMarkerMissing",
				message:   []string{"the function will roll the Envoy pods itself at 2026-12-01T12:00:03Z"},
				ttlAtMost: 3 * time.Second,
			},
			record: obj{"rolloutCompleted": "2026-12-01T11:59:45Z", "firstSeen": "2026-12-01T11:59:48Z"},
		},
		"RecordOfAnotherRollout": {
			reason: "The record is of an earlier rollout: the settle time starts again.",
			xr:     withMarkerRecord(gatewayXR(nil), now.Add(-time.Hour), now.Add(-time.Hour)),
			obs:    gw(true, progressed(noMarker(), "NewReplicaSetAvailable", completed), true, nil),
			want: want{
				condition: "STATUS_CONDITION_FALSE/ExtProcMarkerMissing",
				message:   []string{"the function will roll the Envoy pods itself at 2026-12-01T12:00:15Z"},
				ttlAtMost: 15 * time.Second,
			},
			record: obj{"rolloutCompleted": "2026-12-01T11:59:45Z", "firstSeen": "2026-12-01T12:00:00Z"},
		},
		"SettleTimeReached": {
			reason: "The function first saw the completed rollout 15 s ago, the anchor is accepted, the filter-config Secret is there, AI Gateway wrote no marker: the function writes its own, valued the rollout's completion time, and says why.",
			xr:     withMarkerRecord(gatewayXR(nil), completed, now.Add(-15*time.Second)),
			obs:    gw(true, progressed(noMarker(), "NewReplicaSetAvailable", completed), true, nil),
			want: want{
				marker:    "2026-12-01T11:59:45Z",
				condition: "STATUS_CONDITION_FALSE/ExtProcMarkerMissing",
				message:   []string{"the function has set its own marker modelplane.ai/ext-proc-verified=2026-12-01T11:59:45Z on the EnvoyProxy \"inference-gateway\""},
				results:   []*fnv1.Result{written},
				ttlAtMost: time.Second,
			},
			record: obj{"rolloutCompleted": "2026-12-01T11:59:45Z", "firstSeen": "2026-12-01T11:59:45Z"},
		},
		"FilterConfigSecretMissing": {
			reason: "Everything else holds, long since, but AI Gateway's filter-config Secret does not exist (its controller failed before creating it): new pods would get no sidecar, so no marker, and the message says what the function waits for.",
			xr:     withMarkerRecord(gatewayXR(nil), completed, now.Add(-time.Hour)),
			obs:    gw(true, progressed(noMarker(), "NewReplicaSetAvailable", completed), true, filterConfigSeen(false)),
			want: want{
				condition: "STATUS_CONDITION_FALSE/ExtProcMarkerMissing",
				message:   []string{`once AI Gateway's filter-config Secret "inference-gateway-modelplane-system" exists in "envoy-gateway-system"`},
			},
		},
		"ProviderDoesNotSanitize": {
			reason: "Without providerSanitizesSecrets the function cannot observe the filter-config Secret, so it never writes its marker, and says what to do.",
			xr:     withMarkerRecord(gatewayXR(nil), completed, now.Add(-time.Hour)),
			input:  obj{"apiVersion": "inferencegateway.fn.crossplane.io/v1beta1", "kind": "Input"},
			obs:    gw(true, progressed(noMarker(), "NewReplicaSetAvailable", completed), true, nil),
			want: want{
				condition: "STATUS_CONDITION_FALSE/ExtProcMarkerMissing",
				message:   []string{"Run the provider with --sanitize-secrets and set the function Input's providerSanitizesSecrets: true, or upgrade AI Gateway to v1.1.0 or later"},
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
			in := tc.input
			if in == nil {
				in = sanitizingInput
			}
			req := newRequest(t, xr, tc.obs, nil)
			req.Input = mustStruct(t, in)
			f := newAt(now)
			rsp, err := f.RunFunction(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			st, _ := rsp.GetDesired().GetComposite().GetResource().AsMap()["status"].(obj)
			var record obj
			if r, ok := st["extProcMarker"].(obj); ok {
				record = r
			}
			if diff := cmp.Diff(tc.record, record); diff != "" {
				t.Errorf("%s\nstatus.extProcMarker: -want, +got:\n%s", tc.reason, diff)
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

// TestOwnExtProcMarkerOverReconciles runs the function's own marker over
// several reconciles, each reading the status the one before wrote, as
// Crossplane does: the settle time counts from the first sight however
// often the function runs, and two reconciles that each decide to write
// the marker (the first one's EnvoyProxy not yet observed) write the same
// value, so Envoy rolls once.
func TestOwnExtProcMarkerOverReconciles(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	completed := t0.Add(-time.Hour)
	obs := observedGateway("203.0.113.10", true, progressed(deploymentManifest(1, 1, false, 2, 2, 2), "NewReplicaSetAvailable", completed), true)
	maps.Copy(obs, filterConfigSeen(true))

	xr := gatewayXR(nil)
	var markers []string
	for _, at := range []time.Duration{0, 5 * time.Second, 14 * time.Second, 15 * time.Second, 16 * time.Second} {
		req := newRequest(t, xr, obs, nil)
		req.Input = mustStruct(t, sanitizingInput)
		f := newAt(t0.Add(at))
		rsp, err := f.RunFunction(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		markers = append(markers, composedMarker(rsp))
		// Crossplane writes the desired composite's status; the next
		// reconcile observes it.
		xr = gatewayXR(nil)
		xr["status"] = rsp.GetDesired().GetComposite().GetResource().AsMap()["status"]
	}
	want := []string{"", "", "", "2026-12-01T11:00:00Z", "2026-12-01T11:00:00Z"}
	if diff := cmp.Diff(want, markers); diff != "" {
		t.Errorf("the function's marker at 0, 5, 14, 15 and 16 s after it first saw the completed rollout: -want, +got:\n%s", diff)
	}
}
