package claim

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWinner(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	winner := Claimant{Name: "prod", Created: t0, Serving: true}
	cases := map[string]struct {
		reason string
		cs     []Claimant
		want   string
	}{
		"Alone": {
			reason: "A gateway alone on its cluster wins it.",
			cs:     []Claimant{winner}, want: "prod",
		},
		"LoserCreated": {
			reason: "A second gateway created later, with no address, loses.",
			cs:     []Claimant{winner, {Name: "a-second", Created: t0.Add(time.Hour)}}, want: "prod",
		},
		"LoserDeleted": {
			reason: "When the loser is deleted, the list holds only the winner again.",
			cs:     []Claimant{winner}, want: "prod",
		},
		"LoserRecreated": {
			reason: "A recreated loser is newer than ever and still has no address.",
			cs:     []Claimant{{Name: "a-second", Created: t0.Add(2 * time.Hour)}, winner}, want: "prod",
		},
		"OlderLoserWithoutAddress": {
			reason: "An older gateway whose claim lost (it never got an address) does not take over the serving one.",
			cs:     []Claimant{{Name: "a-old", Created: t0.Add(-time.Hour)}, winner}, want: "prod",
		},
		"BothServing": {
			reason: "Both have an address (one moved to this cluster): the oldest wins.",
			cs:     []Claimant{{Name: "z-old", Created: t0.Add(-time.Hour), Serving: true}, winner}, want: "z-old",
		},
		"NeitherServing": {
			reason: "Neither has an address yet: the oldest wins.",
			cs:     []Claimant{{Name: "b", Created: t0.Add(time.Minute)}, {Name: "c", Created: t0}}, want: "c",
		},
		"SameTimestamp": {
			reason: "Created in the same second, neither serving: the first by name wins, whatever the order.",
			cs:     []Claimant{{Name: "b", Created: t0}, {Name: "a", Created: t0}}, want: "a",
		},
		"SameTimestampBothServing": {
			reason: "Same second, both serving: the first by name.",
			cs:     []Claimant{{Name: "b", Created: t0, Serving: true}, {Name: "a", Created: t0, Serving: true}}, want: "a",
		},
		"ClaimedThroughBlip": {
			reason: "The winner's Gateway was not observed for a reconcile, so it has no address: its claim keeps the cluster from an older loser.",
			cs:     []Claimant{{Name: "a-old", Created: t0.Add(-time.Hour)}, {Name: "prod", Created: t0, Claimed: true}}, want: "prod",
		},
		"ClaimedOverServing": {
			reason: "A claim outranks an address (an older gateway that served before claims were recorded, and lost the race since).",
			cs:     []Claimant{{Name: "a-old", Created: t0.Add(-time.Hour), Serving: true}, {Name: "prod", Created: t0, Claimed: true}}, want: "prod",
		},
		"BothClaimed": {
			reason: "Created at once, both claimed before seeing each other: the older, on both sides.",
			cs:     []Claimant{{Name: "a-new", Created: t0.Add(time.Second), Claimed: true}, {Name: "z-old", Created: t0, Claimed: true}}, want: "z-old",
		},
		"DeletingWinner": {
			reason: "A winner being deleted no longer counts: the loser wins.",
			cs:     []Claimant{{Name: "prod", Created: t0, Claimed: true, Serving: true, Deleting: true}, {Name: "second", Created: t0.Add(time.Hour), Recorded: "prod"}}, want: "second",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := pickWinner(tc.cs)
			if !ok {
				t.Fatalf("%s\nWinner(...) found none", tc.reason)
			}
			if diff := cmp.Diff(tc.want, got.Name); diff != "" {
				t.Errorf("%s\nWinner(...): -want, +got:\n%s", tc.reason, diff)
			}
			// The order of the list never matters.
			rev := make([]Claimant, len(tc.cs))
			for i, c := range tc.cs {
				rev[len(tc.cs)-1-i] = c
			}
			if got2, _ := pickWinner(rev); got2.Name != got.Name {
				t.Errorf("%s\nWinner depends on the order: %q and %q", tc.reason, got.Name, got2.Name)
			}
		})
	}
	if _, ok := pickWinner(nil); ok {
		t.Errorf("pickWinner(nil) found a winner")
	}
	if w, ok := pickWinner([]Claimant{{Name: "prod", Deleting: true}}); ok {
		t.Errorf("pickWinner(...) picked %q, which is being deleted", w.Name)
	}
}

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	prod := Claimant{Name: "prod", Created: t0, Claimed: true, Serving: true, Recorded: "prod"}
	prodDeleting := prod
	prodDeleting.Deleting = true
	second := Claimant{Name: "second", Created: t0.Add(time.Hour), Recorded: "prod"}
	fresh := Claimant{Name: "fresh", Created: t0.Add(3 * time.Hour)}
	gone := Leftovers{Fetched: true}
	cases := map[string]struct {
		reason   string
		self     Claimant
		others   []Claimant
		unlisted bool
		previous Leftovers
		want     Decision
	}{
		"NotListed": {
			reason: "Before Crossplane fetched the InferenceGateways the gateway wins, and waits for nobody (Crossplane calls the function again once it has).",
			self:   second, unlisted: true,
			want: Decision{Outcome: Won, Winner: "second"},
		},
		"Lost": {
			reason: "A live winner keeps the cluster; the loser composes nothing there.",
			self:   second, others: []Claimant{prod, second},
			want: Decision{Outcome: Lost, Winner: "prod"},
		},
		"LostWhateverIsLeft": {
			reason: "A loser never waits: what is left of a previous gateway is not its business.",
			self:   second, others: []Claimant{prod}, previous: Leftovers{Fetched: true, Left: 2},
			want: Decision{Outcome: Lost, Winner: "prod"},
		},
		"SelfAsObservedNow": {
			reason: "The list may hold an older copy of the gateway itself: the gateway counts as observed now.",
			self:   prod, others: []Claimant{{Name: "prod", Created: t0}, second},
			want: Decision{Outcome: Won, Winner: "prod"},
		},
		"Claimed": {
			reason: "A winner that claimed the cluster waits for nobody.",
			self:   prod, others: []Claimant{prod, second},
			want: Decision{Outcome: Won, Winner: "prod"},
		},
		"TakeOverNotFetched": {
			reason: "The winner is being deleted: the loser takes over, and waits until the previous gateway's Objects are fetched.",
			self:   second, others: []Claimant{prodDeleting, second},
			want: Decision{Outcome: WaitForPrevious, Winner: "second", Previous: "prod"},
		},
		"TakeOverLeft": {
			reason: "Objects of the previous gateway remain: the new winner waits.",
			self:   second, others: []Claimant{prodDeleting}, previous: Leftovers{Fetched: true, Left: 2},
			want: Decision{Outcome: WaitForPrevious, Winner: "second", Previous: "prod"},
		},
		"TakeOverGone": {
			reason: "The previous gateway's Objects are gone: the new winner composes, still naming the previous gateway until its claim is recorded.",
			self:   second, others: []Claimant{prodDeleting}, previous: gone,
			want: Decision{Outcome: Won, Winner: "second", Previous: "prod"},
		},
		"WinnerGoneFromList": {
			reason: "The winner is gone from the list: the loser still knows whom it lost to.",
			self:   second, others: []Claimant{second},
			want: Decision{Outcome: WaitForPrevious, Winner: "second", Previous: "prod"},
		},
		"CreatedWhileDeleting": {
			reason: "A gateway created while the winner is being deleted never lost to it, but sees it listed with a deletionTimestamp.",
			self:   fresh, others: []Claimant{prodDeleting, fresh}, previous: Leftovers{Fetched: true, Left: 1},
			want: Decision{Outcome: WaitForPrevious, Winner: "fresh", Previous: "prod"},
		},
		"DeletingNeverComposed": {
			reason: "A gateway being deleted that neither claimed nor served composed nothing to wait for.",
			self:   fresh, others: []Claimant{{Name: "other", Created: t0, Deleting: true}},
			want: Decision{Outcome: Won, Winner: "fresh"},
		},
		"FreshCluster": {
			reason: "Alone on a cluster nobody composed: nothing to wait for, whatever the previous requirement holds.",
			self:   fresh, others: []Claimant{fresh}, previous: Leftovers{Fetched: true, Left: 3},
			want: Decision{Outcome: Won, Winner: "fresh"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Decide(tc.self, tc.others, !tc.unlisted, tc.previous)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nDecide(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestOutcomeString(t *testing.T) {
	got := []string{Won.String(), Lost.String(), WaitForPrevious.String(), Outcome(7).String()}
	want := []string{"Won", "Lost", "WaitForPrevious", "Outcome(7)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Outcome.String(): -want, +got:\n%s", diff)
	}
}
