package fn

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// namedGateway is an InferenceGateway on the cluster gpu-cluster-1, created
// at the given time, with an address or not.
func namedGateway(name, created, addr string) obj {
	xr := gatewayXR(nil)
	xr["metadata"] = obj{"name": name, "creationTimestamp": created}
	if addr != "" {
		xr["status"] = obj{"address": addr}
	}
	return xr
}

// TestOneGatewayPerCluster runs the second InferenceGateway on a cluster
// that already has one: it composes nothing there, says
// ClusterAlreadyHasGateway naming the winner, and is no Fatal.
func TestOneGatewayPerCluster(t *testing.T) {
	prod := namedGateway("prod", "2026-12-01T04:00:00Z", "203.0.113.10")
	second := namedGateway("second", "2026-12-01T05:00:00Z", "")
	elsewhere := namedGateway("elsewhere", "2026-11-01T00:00:00Z", "198.51.100.1")
	elsewhere["spec"].(obj)["providerConfigName"] = "gpu-cluster-2"

	cases := map[string]struct {
		reason   string
		xr       obj
		observed map[string]obj
		list     []obj
		want     summary
		message  string
	}{
		"SecondGatewayLoses": {
			reason: "The second gateway on the cluster composes nothing and names the winner.",
			xr:     second,
			list:   []obj{elsewhere, prod, second},
			want: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_FALSE/ClusterAlreadyHasGateway"},
				Resources:  map[string]string{},
				XRReady:    "READY_FALSE",
			},
			message: `the InferenceGateway "prod" already composes the gateway`,
		},
		"WinnerUnmoved": {
			reason:   "The winner composes as before whatever the other gateways on the cluster.",
			xr:       prod,
			observed: observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true),
			list:     []obj{elsewhere, prod, second},
			want: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_TRUE/Serving"},
				Resources:  readiness(allGateway...),
				XRReady:    "READY_UNSPECIFIED",
				Results:    []string{openResult},
			},
		},
		"OtherClusterIgnored": {
			reason: "An older gateway on another cluster does not matter.",
			xr:     second,
			list:   []obj{elsewhere, second},
			want: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_FALSE/GatewayNotProgrammed"},
				Resources:  readiness(),
				XRReady:    "READY_FALSE",
				Results:    []string{openResult},
			},
		},
		"LoserReleasesWhatItComposed": {
			reason: "A loser that composed before it saw the winner makes its Objects observe-only, so letting them go never deletes the winner's objects; its observe-only Object goes at once.",
			xr:     second,
			observed: map[string]obj{
				"gateway":          object("gateway", gatewayManifest(""), true, false),
				"envoy-deployment": observeOnlyObject(object("envoy-deployment", nil, true, false)),
			},
			list: []obj{prod, second},
			want: summary{
				Conditions: []string{"GatewayReady=STATUS_CONDITION_FALSE/ClusterAlreadyHasGateway"},
				Resources:  map[string]string{"gateway": "READY_FALSE"},
				XRReady:    "READY_FALSE",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, newRequest(t, tc.xr, tc.observed, map[string][]obj{"inference-gateways": tc.list}))
			if diff := cmp.Diff(tc.want, summarize(rsp), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nRunFunction(...): -want, +got:\n%s", tc.reason, diff)
			}
			if msg := condition(rsp, "GatewayReady").GetMessage(); !strings.Contains(msg, tc.message) {
				t.Errorf("%s\nGatewayReady message %q does not contain %q", tc.reason, msg, tc.message)
			}
			want := &fnv1.ResourceSelector{ApiVersion: "modelplane.ai/v1alpha1", Kind: "InferenceGateway", Match: &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{}}}
			if diff := cmp.Diff(want, rsp.GetRequirements().GetResources()["inference-gateways"], protocmp.Transform()); diff != "" {
				t.Errorf("%s\nthe requirement for every InferenceGateway: -want, +got:\n%s", tc.reason, diff)
			}
			if g, ok := rsp.GetDesired().GetResources()["gateway"]; ok {
				ps := g.GetResource().AsMap()["spec"].(obj)["managementPolicies"]
				lost := strings.HasSuffix(tc.want.Conditions[0], "ClusterAlreadyHasGateway")
				if diff := cmp.Diff([]any{"Observe"}, ps); lost && diff != "" {
					t.Errorf("%s\nthe released gateway Object's managementPolicies: -want, +got:\n%s", tc.reason, diff)
				}
			}
		})
	}
}

func observeOnlyObject(o obj) obj {
	o["spec"].(obj)["managementPolicies"] = []any{"Observe"}
	return o
}

// clusterSim is a control plane with InferenceGateways on one gateway
// cluster, for tests over several reconciles: Crossplane fetches what the
// function requires (calling it again until its requirements settle, as
// crossplane v2.2.0 and v2.3.0 internal/xfn/required_resources.go,
// FetchingFunctionRunner, does), applies the composite's status, and
// deletes the Objects the function stops desiring; provider-kubernetes
// reports each Object's remote object as the fixtures' ready gateway has
// it.
type clusterSim struct {
	t        *testing.T
	gateways map[string]obj
	// objects are every Object on the control plane, by owner and
	// composition resource name.
	objects map[string]map[string]obj
	// removed lists the remote objects deleted with an Object that the
	// function stopped desiring, as "owner/name", for Objects whose
	// policies allowed it.
	removed []string
	// hidden gateways are not listed yet (the API server has them, the
	// cache Crossplane lists from not yet).
	hidden map[string]bool
}

func newClusterSim(t *testing.T, gateways ...obj) *clusterSim {
	s := &clusterSim{t: t, gateways: map[string]obj{}, objects: map[string]map[string]obj{}, hidden: map[string]bool{}}
	for _, g := range gateways {
		s.gateways[g["metadata"].(obj)["name"].(string)] = g
	}
	return s
}

// reconcile runs the function for the named gateway until its requirements
// settle, and applies the result.
func (s *clusterSim) reconcile(name string) *fnv1.RunFunctionResponse {
	s.t.Helper()
	var required map[string][]obj
	var reqs *fnv1.Requirements
	var rsp *fnv1.RunFunctionResponse
	for range 6 {
		rsp = run(s.t, newRequest(s.t, s.gateways[name], s.objects[name], required))
		if required != nil && proto.Equal(rsp.GetRequirements(), reqs) {
			break
		}
		reqs = rsp.GetRequirements()
		required = map[string][]obj{}
		for k, sel := range reqs.GetResources() {
			required[k] = s.fetch(sel)
		}
	}
	s.apply(name, rsp)
	return rsp
}

// fetch returns what Crossplane lists for a selector.
func (s *clusterSim) fetch(sel *fnv1.ResourceSelector) []obj {
	var out []obj
	switch sel.GetKind() {
	case "InferenceGateway":
		for _, n := range slices.Sorted(maps.Keys(s.gateways)) {
			if !s.hidden[n] {
				out = append(out, s.gateways[n])
			}
		}
	case "Object":
		for _, owner := range slices.Sorted(maps.Keys(s.objects)) {
			for _, o := range s.objects[owner] {
				md := o["metadata"].(obj)
				labels, _ := md["labels"].(obj)
				match := md["namespace"] == sel.GetNamespace()
				for k, v := range sel.GetMatchLabels().GetLabels() {
					match = match && labels[k] == v
				}
				if match {
					out = append(out, o)
				}
			}
		}
	}
	return out
}

// apply writes the response's status over the composite's (Crossplane
// applies it with server-side apply as one field manager, so what the
// function no longer writes goes), and makes the desired Objects the
// observed ones.
func (s *clusterSim) apply(name string, rsp *fnv1.RunFunctionResponse) {
	g := s.gateways[name]
	st := status(rsp)
	if st == nil {
		st = obj{}
	}
	var conds []any
	for _, c := range rsp.GetConditions() {
		v := strings.TrimPrefix(c.GetStatus().String(), "STATUS_CONDITION_")
		conds = append(conds, obj{"type": c.GetType(), "status": strings.ToUpper(v[:1]) + strings.ToLower(v[1:]), "reason": c.GetReason(), "message": c.GetMessage(), "lastTransitionTime": t0})
	}
	st["conditions"] = conds
	g["status"] = st

	ready := observedGateway("203.0.113.10", true, deploymentManifest(2, 2, true, 2, 2, 2), true)
	before := s.objects[name]
	after := map[string]obj{}
	for comp, r := range rsp.GetDesired().GetResources() {
		o := r.GetResource().AsMap()
		md := o["metadata"].(obj)
		md["name"] = name + "-" + comp
		md["labels"] = obj{"crossplane.io/composite": name}
		md["annotations"] = obj{"crossplane.io/composition-resource-name": comp}
		if f, ok := ready[comp]; ok {
			o["status"] = f["status"]
		} else {
			o["status"] = object(comp, plainManifest("ConfigMap"), true, true)["status"]
		}
		after[comp] = o
	}
	for comp, o := range before {
		if _, ok := after[comp]; !ok && !slices.Equal(policies(o), []string{"Observe"}) {
			s.removed = append(s.removed, name+"/"+comp)
		}
	}
	s.objects[name] = after
}

func policies(o obj) []string {
	var out []string
	ps, _ := o["spec"].(obj)["managementPolicies"].([]any)
	for _, p := range ps {
		out = append(out, p.(string))
	}
	return out
}

// gatewayReady is the GatewayReady condition as summarize shows it.
func gatewayReady(reason string) []string {
	if reason == "Serving" {
		return []string{"GatewayReady=STATUS_CONDITION_TRUE/Serving"}
	}
	return []string{"GatewayReady=STATUS_CONDITION_FALSE/" + reason}
}

// TestClusterClaimSurvivesBlip runs a winner and an older loser on one
// cluster through a reconcile in which the winner's Gateway is not
// observed, so its status.address goes: the winner keeps the cluster, the
// loser stays a loser, and neither flips.
func TestClusterClaimSurvivesBlip(t *testing.T) {
	prod := namedGateway("prod", "2026-12-01T04:00:00Z", "")
	prod["status"] = obj{"address": "203.0.113.10", "clusterGateway": "prod"}
	older := namedGateway("older", "2026-12-01T03:00:00Z", "")
	older["status"] = obj{"clusterGateway": "prod", "conditions": []any{cond("GatewayReady", false, "ClusterAlreadyHasGateway", "")}}
	s := newClusterSim(t, prod, older)

	steps := []struct {
		reason string
		name   string
		blip   bool
		want   string
	}{
		{reason: "prod, which claimed the cluster, composes", name: "prod", want: "GatewayNotProgrammed"},
		{reason: "prod serves", name: "prod", want: "Serving"},
		{reason: "the older gateway loses to prod", name: "older", want: "ClusterAlreadyHasGateway"},
		{reason: "prod's Gateway is not observed: prod keeps composing, without an address", name: "prod", blip: true, want: "GatewayNotProgrammed"},
		{reason: "the older gateway sees prod without an address, and still loses", name: "older", want: "ClusterAlreadyHasGateway"},
		{reason: "prod serves again", name: "prod", want: "Serving"},
		{reason: "the older gateway still loses", name: "older", want: "ClusterAlreadyHasGateway"},
	}
	for i, st := range steps {
		if st.blip {
			s.objects["prod"]["gateway"]["status"] = object("gateway", gatewayManifest(""), false, false)["status"]
		}
		rsp := s.reconcile(st.name)
		if diff := cmp.Diff(gatewayReady(st.want), summarize(rsp).Conditions); diff != "" {
			t.Errorf("step %d, %s:\nconditions: -want, +got:\n%s", i, st.reason, diff)
		}
		if diff := cmp.Diff("prod", status(rsp)["clusterGateway"]); diff != "" {
			t.Errorf("step %d, %s:\nstatus.clusterGateway: -want, +got:\n%s", i, st.reason, diff)
		}
		if n := len(rsp.GetDesired().GetResources()); st.name == "older" && n != 0 {
			t.Errorf("step %d, %s: the loser composes %d Objects, want none", i, st.reason, n)
		}
		if st.blip && status(rsp)["address"] != nil {
			t.Errorf("step %d, %s: status.address is %v, want none", i, st.reason, status(rsp)["address"])
		}
	}
	if len(s.removed) != 0 {
		t.Errorf("remote objects deleted with Objects the function stopped desiring: %v", s.removed)
	}
}

// TestClusterRace creates two gateways on one cluster at once: each
// composes and claims it before it sees the other. Once both are listed,
// both pick the older, whichever reconciles first, and the other lets go of
// its Objects without deleting a remote object.
func TestClusterRace(t *testing.T) {
	s := newClusterSim(t, namedGateway("a-new", "2026-12-01T04:00:01Z", ""), namedGateway("z-old", "2026-12-01T04:00:00Z", ""))
	steps := []struct {
		reason string
		name   string
		hidden string
		want   string
		claim  string
	}{
		{reason: "z-old does not see a-new yet: it composes and claims", name: "z-old", hidden: "a-new", want: "GatewayNotProgrammed", claim: "z-old"},
		{reason: "a-new does not see z-old yet: it composes and claims too", name: "a-new", hidden: "z-old", want: "GatewayNotProgrammed", claim: "a-new"},
		{reason: "a-new sees z-old's claim: both claimed, the older wins; a-new makes its Objects observe-only", name: "a-new", want: "ClusterAlreadyHasGateway", claim: "z-old"},
		{reason: "z-old keeps the cluster", name: "z-old", want: "Serving", claim: "z-old"},
		{reason: "a-new lets go of its observe-only Objects", name: "a-new", want: "ClusterAlreadyHasGateway", claim: "z-old"},
		{reason: "z-old still serves", name: "z-old", want: "Serving", claim: "z-old"},
	}
	for i, st := range steps {
		s.hidden = map[string]bool{st.hidden: true}
		rsp := s.reconcile(st.name)
		if diff := cmp.Diff(gatewayReady(st.want), summarize(rsp).Conditions); diff != "" {
			t.Errorf("step %d, %s:\nconditions: -want, +got:\n%s", i, st.reason, diff)
		}
		if diff := cmp.Diff(st.claim, status(rsp)["clusterGateway"]); diff != "" {
			t.Errorf("step %d, %s:\nstatus.clusterGateway: -want, +got:\n%s", i, st.reason, diff)
		}
		if st.want == "ClusterAlreadyHasGateway" {
			for n, r := range rsp.GetDesired().GetResources() {
				if ps := policies(r.GetResource().AsMap()); !slices.Equal(ps, []string{"Observe"}) {
					t.Errorf("step %d, %s: the loser's Object %q has managementPolicies %v, want [Observe]", i, st.reason, n, ps)
				}
			}
		}
	}
	if n := len(s.objects["a-new"]); n != 0 {
		t.Errorf("the loser still has %d Objects, want none", n)
	}
	if len(s.removed) != 0 {
		t.Errorf("remote objects deleted with Objects the function stopped desiring: %v", s.removed)
	}
}

// TestTakeOverAfterDeletion deletes the winner of a cluster: the loser
// takes it over only once the winner's Objects are gone, so none of the
// fixed-name remote objects it applies is deleted under it by the winner's
// Objects going.
func TestTakeOverAfterDeletion(t *testing.T) {
	w := namedGateway("winner", "2026-12-01T04:00:00Z", "203.0.113.10")
	w["status"].(obj)["clusterGateway"] = "winner"
	l := namedGateway("loser", "2026-12-01T05:00:00Z", "")
	s := newClusterSim(t, w, l)
	s.reconcile("winner")
	if rsp := s.reconcile("loser"); !slices.Equal(summarize(rsp).Conditions, gatewayReady("ClusterAlreadyHasGateway")) {
		t.Fatalf("the second gateway does not lose: %v", summarize(rsp).Conditions)
	}
	// Deleted two seconds ago: a quarter of that is under the back-off's
	// first step, a second (compose.GatewayBackoff).
	deleted := time.Now().Add(-2 * time.Second).UTC().Format(time.RFC3339)

	steps := []struct {
		reason string
		act    func()
		want   string
		claim  string
		ttl    time.Duration
	}{
		{
			reason: "the winner is deleted in the foreground: it is still listed, with a deletionTimestamp, while the garbage collector deletes its Objects",
			act: func() {
				s.gateways["winner"]["metadata"].(obj)["deletionTimestamp"] = deleted
				for _, o := range s.objects["winner"] {
					o["metadata"].(obj)["deletionTimestamp"] = deleted
				}
			},
			want: "WaitingForPreviousGateway", claim: "winner", ttl: time.Second,
		},
		{
			reason: "the winner is gone from the list (in the background it goes at once), its Objects not yet: provider-kubernetes still deletes their remote objects",
			act:    func() { delete(s.gateways, "winner") },
			want:   "WaitingForPreviousGateway", claim: "winner", ttl: time.Second,
		},
		{
			reason: "all but one of the winner's Objects are gone",
			act: func() {
				for n := range s.objects["winner"] {
					if n != "gateway" {
						delete(s.objects["winner"], n)
					}
				}
			},
			want: "WaitingForPreviousGateway", claim: "winner", ttl: time.Second,
		},
		{
			reason: "the last one is gone: the loser composes the cluster and claims it",
			act:    func() { delete(s.objects, "winner") },
			// Losing and waiting record no not-ready spell, so the one of
			// composing starts now, with the fast requeue.
			want: "GatewayNotProgrammed", claim: "loser", ttl: time.Second,
		},
		{
			reason: "the new winner serves",
			act:    func() {},
			want:   "Serving", claim: "loser", ttl: time.Minute,
		},
	}
	for i, st := range steps {
		st.act()
		rsp := s.reconcile("loser")
		if diff := cmp.Diff(gatewayReady(st.want), summarize(rsp).Conditions); diff != "" {
			t.Errorf("step %d, %s:\nconditions: -want, +got:\n%s", i, st.reason, diff)
		}
		if diff := cmp.Diff(st.claim, status(rsp)["clusterGateway"]); diff != "" {
			t.Errorf("step %d, %s:\nstatus.clusterGateway: -want, +got:\n%s", i, st.reason, diff)
		}
		if diff := cmp.Diff(st.ttl, rsp.GetMeta().GetTtl().AsDuration()); diff != "" {
			t.Errorf("step %d, %s:\nTTL: -want, +got:\n%s", i, st.reason, diff)
		}
		sel := rsp.GetRequirements().GetResources()["previous-gateway-objects"]
		if st.want == "WaitingForPreviousGateway" {
			if n := len(rsp.GetDesired().GetResources()); n != 0 {
				t.Errorf("step %d, %s: the waiting gateway composes %d Objects, want none", i, st.reason, n)
			}
			msg := condition(rsp, "GatewayReady").GetMessage()
			for _, want := range []string{`the InferenceGateway "winner" composed the gateway`, "winner-gateway", `"loser" composes nothing there until they are gone`} {
				if !strings.Contains(msg, want) {
					t.Errorf("step %d, %s: GatewayReady message %q does not contain %q", i, st.reason, msg, want)
				}
			}
			want := &fnv1.ResourceSelector{ApiVersion: "kubernetes.m.crossplane.io/v1alpha1", Kind: "Object", Namespace: new("modelplane-system"),
				Match: &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: map[string]string{"crossplane.io/composite": "winner"}}}}
			if diff := cmp.Diff(want, sel, protocmp.Transform()); diff != "" {
				t.Errorf("step %d, %s:\nthe requirement for the winner's Objects: -want, +got:\n%s", i, st.reason, diff)
			}
		}
		if st.claim == "loser" && st.want == "Serving" && sel != nil {
			t.Errorf("step %d, %s: a gateway that claimed its cluster still asks for the previous gateway's Objects", i, st.reason)
		}
	}
	if len(s.removed) != 0 {
		t.Errorf("remote objects deleted with Objects the function stopped desiring: %v", s.removed)
	}
}
