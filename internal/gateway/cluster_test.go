package gateway

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/modelplaneai/function-inference-gateway/internal/claim"
	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/gatewayready"
)

func TestClaimantOf(t *testing.T) {
	created := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	xr := func(addr, reason, recorded string, deleting bool) map[string]any {
		st := map[string]any{"address": addr, "clusterGateway": recorded}
		if reason != "" {
			st["conditions"] = []any{map[string]any{"type": ConditionType, "status": "False", "reason": reason, "lastTransitionTime": "2026-12-01T00:00:00Z"}}
		}
		md := map[string]any{"name": "g", "creationTimestamp": "2026-12-01T04:00:00Z"}
		if deleting {
			md["deletionTimestamp"] = "2026-12-01T05:00:00Z"
		}
		return map[string]any{"metadata": md, "spec": map[string]any{"providerConfigName": "c1"}, "status": st}
	}
	cases := map[string]struct {
		xr   map[string]any
		want claim.Claimant
	}{
		"Address":             {xr: xr("192.0.2.1", "", "", false), want: claim.Claimant{Serving: true}},
		"NoAddress":           {xr: xr("", "", "", false), want: claim.Claimant{}},
		"StaleAddressOfLoser": {xr: xr("192.0.2.1", gatewayready.ReasonClusterAlreadyHasGateway, "other", false), want: claim.Claimant{Recorded: "other"}},
		"AddressNotReady":     {xr: xr("192.0.2.1", gatewayready.ReasonOldReplicasPresent, "g", false), want: claim.Claimant{Claimed: true, Serving: true, Recorded: "g"}},
		"ClaimWithoutAddress": {xr: xr("", gatewayready.ReasonNotProgrammed, "g", false), want: claim.Claimant{Claimed: true, Recorded: "g"}},
		"Deleting":            {xr: xr("192.0.2.1", "", "g", true), want: claim.Claimant{Claimed: true, Serving: true, Deleting: true, Recorded: "g"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, pc := claimantOf(tc.xr)
			tc.want.Name, tc.want.Created = "g", created
			if diff := cmp.Diff(tc.want, c); diff != "" || pc != "c1" {
				t.Errorf("claimantOf(...) on %q: -want, +got:\n%s", pc, diff)
			}
		})
	}
}

func TestClusterOf(t *testing.T) {
	gw := func(name, created, recorded, addr string, deleting bool) map[string]any {
		md := map[string]any{"name": name, "creationTimestamp": created}
		if deleting {
			md["deletionTimestamp"] = "2026-12-01T06:00:00Z"
		}
		return map[string]any{"metadata": md, "spec": map[string]any{"providerConfigName": "c1"},
			"status": map[string]any{"clusterGateway": recorded, "address": addr}}
	}
	prod := gw("prod", "2026-12-01T04:00:00Z", "prod", "192.0.2.1", false)
	prodDeleting := gw("prod", "2026-12-01T04:00:00Z", "prod", "192.0.2.1", true)
	second := gw("second", "2026-12-01T05:00:00Z", "prod", "", false)
	fresh := gw("fresh", "2026-12-01T07:00:00Z", "", "", false)
	cases := map[string]struct {
		reason       string
		self         map[string]any
		list         []map[string]any
		unresolved   bool
		wantWinner   string
		wantPrevious string
	}{
		"NotFetched": {
			reason: "Before Crossplane fetched the InferenceGateways the composite counts as the winner (Crossplane calls the function again once it has).",
			self:   second, unresolved: true, wantWinner: "second",
		},
		"Loser": {
			reason: "A live winner keeps the cluster.",
			self:   second, list: []map[string]any{prod, second}, wantWinner: "prod",
		},
		"WinnerClaimed": {
			reason: "A winner that claimed the cluster waits for nobody.",
			self:   prod, list: []map[string]any{prod, second}, wantWinner: "prod",
		},
		"WinnerDeletingListed": {
			reason: "The winner is being deleted: the loser takes over and waits for the gateway it lost to.",
			self:   second, list: []map[string]any{prodDeleting, second}, wantWinner: "second", wantPrevious: "prod",
		},
		"WinnerGone": {
			reason: "The winner is gone from the list: the loser still knows whom it lost to.",
			self:   second, list: []map[string]any{second}, wantWinner: "second", wantPrevious: "prod",
		},
		"CreatedWhileDeleting": {
			reason: "A gateway created while the winner is being deleted never lost to it, but sees it listed with a deletionTimestamp.",
			self:   fresh, list: []map[string]any{prodDeleting, fresh}, wantWinner: "fresh", wantPrevious: "prod",
		},
		"FreshCluster": {
			reason: "Alone on a cluster nobody composed: nothing to wait for.",
			self:   fresh, list: []map[string]any{fresh}, wantWinner: "fresh",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := compose.Request{Composite: tc.self, Required: map[string][]map[string]any{}}
			if !tc.unresolved {
				req.Required[requireGateways] = tc.list
			}
			cl := clusterOf(req, "c1")
			got := []string{cl.Winner, cl.Previous}
			if diff := cmp.Diff([]string{tc.wantWinner, tc.wantPrevious}, got); diff != "" {
				t.Errorf("%s\nclusterOf(...) winner and previous: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestPreviousLeft(t *testing.T) {
	object := func(name, controllerKind string) map[string]any {
		md := map[string]any{"name": name, "namespace": "modelplane-system", "labels": map[string]any{"crossplane.io/composite": "prod"}}
		if controllerKind != "" {
			md["ownerReferences"] = []any{map[string]any{"apiVersion": "modelplane.ai/v1alpha1", "kind": controllerKind, "name": "prod", "uid": "u1", "controller": true}}
		}
		return map[string]any{"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "Object", "metadata": md}
	}
	cases := map[string]struct {
		reason   string
		required map[string][]map[string]any
		want     []string
		resolved bool
	}{
		"NotFetched": {
			reason:   "Not fetched yet: not known to be gone.",
			required: map[string][]map[string]any{},
		},
		"Gone": {
			reason:   "Fetched, none left.",
			required: map[string][]map[string]any{requirePreviousObjects: nil}, resolved: true, want: []string{},
		},
		"Left": {
			reason: "The gateway's Objects count, and so does one nothing controls (orphaned); one a ModelRoute of the same name controls does not.",
			required: map[string][]map[string]any{requirePreviousObjects: {
				object("prod-gateway", Kind), object("prod-orphan", ""), object("prod-route", "ModelRoute"),
			}},
			resolved: true, want: []string{"prod-gateway", "prod-orphan"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			left, resolved := previousLeft(compose.Request{Required: tc.required})
			got := []string{}
			for _, o := range left {
				got = append(got, o.GetName())
			}
			if tc.want == nil {
				tc.want = []string{}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || resolved != tc.resolved {
				t.Errorf("%s\npreviousLeft(...) resolved %t (want %t), left: -want, +got:\n%s", tc.reason, resolved, tc.resolved, diff)
			}
		})
	}
}
