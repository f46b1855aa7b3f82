// Package claim decides which InferenceGateway composes a gateway cluster.
//
// The gateway cluster's objects have fixed names (the Input's), so two
// InferenceGateways with the same providerConfigName would apply, and on
// deletion delete, the same Gateway, EnvoyProxy and routes. One of them
// wins the cluster and composes; the others compose nothing there and say
// ClusterAlreadyHasGateway.
//
// Each records in status.clusterGateway the InferenceGateway it saw
// compose the cluster: the winner its own name (its claim), a loser the
// winner's. Only the function writes it, on every reconcile, and Crossplane
// applies the composite's status with server-side apply as one field
// manager (crossplane v2.2.0 and v2.3.0 composition_functions.go,
// FunctionComposer.Compose, the status patch with FieldOwnerXR), so a field
// the function stops writing goes: a loser never keeps a claim.
//
// The decision is pure: it takes the claimants as read from the composite
// and the InferenceGateways Crossplane fetched, and what is left of the
// previous gateway's Objects; the gateway package reads those and turns the
// decision into what it composes.
package claim

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// Claimant is one InferenceGateway's claim on a gateway cluster.
type Claimant struct {
	Name    string
	Created time.Time
	// Claimed: its status.clusterGateway is its own name, that is it has
	// composed the cluster. It survives a reconcile in which the Gateway
	// is not observed and status.address is empty.
	Claimed bool
	// Serving: it has an address and is not itself a loser. It orders
	// only gateways that have not claimed yet: one that composed before
	// claims were recorded keeps its cluster until its first reconcile
	// records the claim.
	Serving bool
	// Deleting: it has a deletionTimestamp. It never wins: Crossplane is
	// deleting it, and the garbage collector its Objects.
	Deleting bool
	// Recorded is its status.clusterGateway: the InferenceGateway it last
	// saw compose the cluster.
	Recorded string
}

// Outcome is what one InferenceGateway does on its cluster.
type Outcome int

// The outcomes of Decide. Lost and WaitForPrevious compose nothing on the
// cluster: the gateway releases what it may have composed there.
const (
	// Won: the gateway composes the cluster.
	Won Outcome = iota
	// Lost: another InferenceGateway (Decision.Winner) composes it.
	Lost
	// WaitForPrevious: the gateway won the cluster from one that composed
	// it before (Decision.Previous), whose Objects may still be there.
	WaitForPrevious
)

// String names the outcome, for messages and tests.
func (o Outcome) String() string {
	switch o {
	case Won:
		return "Won"
	case Lost:
		return "Lost"
	case WaitForPrevious:
		return "WaitForPrevious"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Leftovers is what Crossplane fetched of the Objects of the gateway that
// composed the cluster before.
type Leftovers struct {
	// Fetched: Crossplane has fetched them, so Left is known.
	Fetched bool
	// Left counts those still there.
	Left int
}

// Decision is what one InferenceGateway does on its cluster, and why.
type Decision struct {
	Outcome Outcome
	// Winner names the InferenceGateway that composes the cluster: the
	// gateway itself unless it Lost, and when the list of
	// InferenceGateways has not been fetched yet.
	Winner string
	// Previous, when the gateway wins but has not claimed the cluster yet,
	// names the InferenceGateway that composed it before, whose Objects
	// must be gone before the gateway composes. It stays set once they are
	// gone (Outcome Won), until the gateway's claim is recorded.
	Previous string
}

// Decide decides what self does on its cluster. others are the
// InferenceGateways on the same cluster, as Crossplane fetched them, when
// listed; self counts as observed now, whether or not others holds it.
// previous is what is left of the previous gateway's Objects; it counts
// only when Decision.Previous is set.
func Decide(self Claimant, others []Claimant, listed bool, previous Leftovers) Decision {
	d := Decision{Outcome: Won, Winner: self.Name}
	if !listed {
		return d
	}
	cs := []Claimant{self}
	for _, c := range others {
		if c.Name != self.Name {
			cs = append(cs, c)
		}
	}
	if w, ok := pickWinner(cs); ok {
		d.Winner = w.Name
	}
	if d.Winner != self.Name {
		d.Outcome = Lost
		return d
	}
	if self.Claimed {
		return d
	}
	// Self takes the cluster over. The gateway it lost to before, if it
	// did, is the one whose Objects may still be there. Crossplane removes
	// a deleted composite's finalizer at once, without running the
	// pipeline (crossplane v2.2.0 and v2.3.0
	// internal/controller/apiextensions/composite/reconciler.go, Reconcile,
	// the meta.WasDeleted branch), so the composite is gone from the list
	// while the garbage collector deletes its composed resources, which
	// name it as their controller (composition_render.go,
	// RenderComposedResourceMetadata): after it, as custom resources are
	// deleted in the background by default, or before it only when it was
	// deleted in the foreground (k8s.io/apiserver v0.36.1
	// pkg/registry/generic/registry/store.go,
	// deletionFinalizersForGarbageCollection). A gateway that did not lose
	// to it (created while it was being deleted) sees it only while it is
	// still listed.
	d.Previous = self.Recorded
	if d.Previous == "" {
		deleting := slices.DeleteFunc(cs, func(c Claimant) bool { return !c.Deleting || (!c.Claimed && !c.Serving) })
		if len(deleting) > 0 {
			d.Previous = slices.MinFunc(deleting, compareClaims).Name
		}
	}
	if d.Previous != "" && (!previous.Fetched || previous.Left > 0) {
		d.Outcome = WaitForPrevious
	}
	return d
}

// pickWinner picks the InferenceGateway that composes a cluster among those not
// being deleted: one that has claimed it, then one that serves, then the
// oldest, then the first by name. A loser never claims nor gets an
// address, because it composes nothing, so a winner keeps the cluster while
// others are created, deleted or recreated, and through a reconcile that
// loses its address. Two created at once may both claim before each sees
// the other; the same order then picks the older, on both sides, and the
// other lets go (the gateway package's lose). It returns false when every
// claimant is being deleted, or there are none.
func pickWinner(cs []Claimant) (Claimant, bool) {
	live := slices.DeleteFunc(slices.Clone(cs), func(c Claimant) bool { return c.Deleting })
	if len(live) == 0 {
		return Claimant{}, false
	}
	return slices.MinFunc(live, compareClaims), true
}

// compareClaims orders claimants by how strong their claim is.
func compareClaims(a, b Claimant) int {
	switch {
	case a.Claimed != b.Claimed:
		if a.Claimed {
			return -1
		}
		return 1
	case a.Serving != b.Serving:
		if a.Serving {
			return -1
		}
		return 1
	case !a.Created.Equal(b.Created):
		return a.Created.Compare(b.Created)
	}
	return strings.Compare(a.Name, b.Name)
}
