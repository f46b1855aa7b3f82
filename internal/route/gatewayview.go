package route

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/decode"
	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
)

// gatewayView is what a ModelRoute knows of its InferenceGateway.
type gatewayView struct {
	// spec is nil while the gateway is unresolved, missing or unreadable.
	spec    *gateway.RouteView
	verdict gateway.Verdict
	address string
	// reason is RoutingReady's reason while the gateway is not ready, why
	// its message.
	reason, why string
	// watched: the gateway-status ConfigMap is observed with the gateway's
	// verdict, and its changes wake the ModelRoute.
	watched bool
	// resumed is when the ConfigMap says the gateway began to report
	// again after a reconcile that could not, if it says so.
	resumed time.Time
	// followed is the verdict RoutingReady follows, recorded in the
	// ModelRoute's status so that a later reconcile never goes back to an
	// older one.
	followed *v1alpha1.FollowedGateway
}

// readGateway reads the InferenceGateway the ModelRoute names, and judges
// it (published).
func readGateway(req compose.Request) gatewayView {
	items, resolved := req.Required[requireGateway]
	switch {
	case !resolved:
		return gatewayView{reason: ReasonWaitingForGateway, why: "the InferenceGateway has not been fetched yet"}
	case len(items) == 0:
		return gatewayView{reason: ReasonWaitingForGateway, why: "the InferenceGateway named by spec.gatewayName does not exist; create it or fix spec.gatewayName"}
	}
	gw := items[0]
	md, _ := gw["metadata"].(map[string]any)
	gwName, _ := md["name"].(string)
	gwUID, _ := md["uid"].(string)
	prev := followedBefore(req.Composite)
	v := gatewayView{reason: ReasonWaitingForGateway, followed: prev}
	st, _ := gw["status"].(map[string]any)
	v.address, _ = st["address"].(string)
	spec, err := gateway.ReadRouteView(gw)
	if err != nil {
		v.why = fmt.Sprintf("the InferenceGateway %q cannot be used: %v", gwName, err)
		return v
	}
	v.spec = &spec
	verdict, err := gateway.ReadVerdict(gw)
	if err != nil {
		v.why = fmt.Sprintf("the InferenceGateway %q has unreadable conditions: %v", gwName, err)
		return v
	}
	read := &v1alpha1.FollowedGateway{Name: gwName, UID: gwUID, Ready: verdict.Ready, Since: metav1.NewTime(verdict.Since)}
	if older(read, prev) {
		v.reason = ReasonGatewayStatusStale
		v.why = fmt.Sprintf("this reconcile read the InferenceGateway %q as %s=%s since %s, older than the %s=%s since %s this ModelRoute already followed: "+
			"a copy that has not caught up, from Crossplane's cache or from Crossplane re-applying the conditions it had cached (crossplane/crossplane#7062); looking again shortly",
			gwName, gateway.ConditionType, conditionStatus(read.Ready), read.Since.UTC().Format(time.RFC3339),
			gateway.ConditionType, conditionStatus(prev.Ready), prev.Since.UTC().Format(time.RFC3339))
		return v
	}
	v.followed = read
	published(req.Observed, verdict, gwName, &v)
	return v
}

// followedBefore is the gateway verdict the ModelRoute's status says it
// last followed, or nil.
func followedBefore(xr map[string]any) *v1alpha1.FollowedGateway {
	st := struct {
		FollowedGateway *v1alpha1.FollowedGateway `json:"followedGateway"`
	}{}
	if decode.Into("the ModelRoute", "status", xr["status"], &st) != nil {
		return nil
	}
	return st.FollowedGateway
}

// older reports whether read is an older verdict of the same
// InferenceGateway than prev. Crossplane reads required resources from its
// informer cache (crossplane v2.3.0 cmd/crossplane/core/core.go passes the
// cached client to xfn.NewExistingRequiredResourcesFetcher), which can lag
// the API server under load, and re-applies the conditions it had cached at
// the start of every reconcile of the gateway, which puts an old verdict
// back for the length of that reconcile (crossplane/crossplane#7062). An
// informer never goes back, and a replay carries its old
// lastTransitionTime, so an older time is one of the two. A recreated
// gateway (another uid) starts a new history. Times are kept to the second,
// so a verdict replayed within the second it was replaced is not caught.
func older(read, prev *v1alpha1.FollowedGateway) bool {
	return prev != nil && read.Name == prev.Name && read.UID == prev.UID &&
		!read.Since.IsZero() && read.Since.Before(&prev.Since)
}

// evidence is what the ModelRoute read of its gateway, for the debug log:
// the verdict it followed, with its time, and the ConfigMap's agreement.
func (v gatewayView) evidence() []any {
	if v.followed == nil {
		return []any{"gateway", v.reason}
	}
	return []any{"gateway", fmt.Sprintf("%s %s=%s since %s", v.followed.Name, gateway.ConditionType, conditionStatus(v.followed.Ready), v.followed.Since.UTC().Format(time.RFC3339)),
		"gatewayView", fmt.Sprintf("ready=%t reason=%s watched=%t", v.verdict.Ready, v.reason, v.watched)}
}

// judge adds the gateway's reason to p while it is not ready.
func (v gatewayView) judge(p *compose.Problems) {
	if !v.verdict.Ready {
		p.Add(v.reason, v.why)
	}
}

// published judges the gateway from both places the function writes its
// verdict: the InferenceGateway's GatewayReady condition, and the
// gateway-status ConfigMap on the gateway cluster, which this ModelRoute
// watches. The gateway is ready only when both say so. Either may lag the
// other: Crossplane writes the composite's status after it has applied the
// composed resources, and the ConfigMap reaches the gateway cluster
// through provider-kubernetes, and this ModelRoute's Object of it follows
// through the provider's watch or poll. Trusting only the ConfigMap would
// let a slow provider keep a ModelRoute ready after its gateway stopped
// being; trusting only the condition would leave the ModelRoute without a
// wake-up call. It reads the ConfigMap only when the condition can be
// compared with it: a gateway that does not report wrote no ConfigMap
// since, and one that lost its cluster never wrote the one there (it is
// per cluster: the winner's). It fills in v's verdict, reason and message
// (of the gateway named name), and whether the ConfigMap is watched.
func published(obs map[string]remote.Observed, fromXR gateway.Verdict, name string, v *gatewayView) {
	v.verdict, v.reason = fromXR, ReasonWaitingForGateway
	quoted := fromXR.Reason
	if fromXR.Message != "" {
		quoted += `: "` + fromXR.Message + `"`
	}
	o, ok := obs[ResourceGatewayStatus]
	data, _, _ := unstructured.NestedStringMap(o.Manifest(), "data")
	if ok && o.Live() {
		v.resumed, _ = time.Parse(time.RFC3339, data[gateway.StatusKeyReportingSince])
	}
	switch {
	case !fromXR.Reported && fromXR.Reason == gateway.VerdictNotReported:
		v.reason = ReasonGatewayNotReporting
		v.why = fmt.Sprintf("the InferenceGateway %q has not reported %s yet", name, gateway.ConditionType)
		return
	case !fromXR.Reported:
		v.reason = ReasonGatewayNotReporting
		v.why = fmt.Sprintf("the InferenceGateway %q does not report %s (%s); its last reconcile applied nothing, because its composition function returned a Fatal result or could not be called: see its events and Synced condition", name, gateway.ConditionType, quoted)
		return
	case fromXR.Reason == gateway.ReasonClusterAlreadyHasGateway:
		v.reason = ReasonGatewayLostCluster
		v.why = fmt.Sprintf("the InferenceGateway %q composes nothing on its cluster, which another InferenceGateway serves (%s)", name, quoted)
		return
	}
	ready, reason := data[gateway.StatusKeyReady], data[gateway.StatusKeyReason]
	v.watched = ok && o.Live() && ready != "" && reason != ""
	switch {
	case v.watched && (ready == "True") != fromXR.Ready:
		v.verdict = gateway.Verdict{Reported: true, Reason: reason}
		v.reason = ReasonGatewayStatusStale
		v.why = fmt.Sprintf("the gateway-status ConfigMap on the gateway cluster says gatewayReady=%s (%s) while the InferenceGateway %q says %s=%s (%s); one of the two is behind: the ConfigMap's Object follows within a watch event when provider-kubernetes runs with --enable-watches, only at its --poll otherwise",
			ready, reason, name, gateway.ConditionType, conditionStatus(fromXR.Ready), fromXR.Reason)
	case !fromXR.Ready:
		v.why = notReady(name, fromXR)
	}
}

// notReady says why the InferenceGateway name is not ready, by its verdict.
func notReady(name string, fromXR gateway.Verdict) string {
	why := fmt.Sprintf("the InferenceGateway %q is not %s (%s)", name, gateway.ConditionType, fromXR.Reason)
	if fromXR.Message != "" {
		why += ": " + fromXR.Message
	}
	if fromXR.Reason == gateway.ReasonSpecRefused {
		// docs/conditions.md, "A refused spec": what was composed serves
		// on, but nothing judges the gateway's rollout.
		why += "; it keeps serving what it composed, this model's route among them, but its readiness is not judged until its spec is fixed"
	}
	return why
}

// conditionStatus spells a condition's status.
func conditionStatus(ready bool) string {
	if ready {
		return "True"
	}
	return "False"
}
