package controlplane

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSoakSettings checks how the soak reads its duration and seed: unset
// skips it (or draws a seed), a bad value is refused rather than run as
// something else.
func TestSoakSettings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		v       string
		set     bool
		want    time.Duration
		wantErr bool
	}{
		{name: "unset skips", want: 0},
		{name: "ten minutes", v: "10m", set: true, want: 10 * time.Minute},
		{name: "no unit", v: "10", set: true, wantErr: true},
		{name: "zero", v: "0s", set: true, wantErr: true},
		{name: "empty", v: "", set: true, wantErr: true},
	} {
		t.Run("duration "+tc.name, func(t *testing.T) {
			got, err := soakDuration(tc.v, tc.set)
			if (err != nil) != tc.wantErr {
				t.Fatalf("soakDuration(%q, %t) error %v, want error %t", tc.v, tc.set, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("soakDuration(%q, %t): -want +got:\n%s", tc.v, tc.set, diff)
			}
		})
	}
	for _, tc := range []struct {
		name    string
		v       string
		want    uint64
		wantErr bool
	}{
		{name: "a printed seed replays", v: "1733356800123456789", want: 1733356800123456789},
		{name: "not a number", v: "abc", wantErr: true},
		{name: "negative", v: "-1", wantErr: true},
	} {
		t.Run("seed "+tc.name, func(t *testing.T) {
			got, err := soakSeed(tc.v, true)
			if (err != nil) != tc.wantErr {
				t.Fatalf("soakSeed(%q) error %v, want error %t", tc.v, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("soakSeed(%q): -want +got:\n%s", tc.v, diff)
			}
		})
	}
	if a, b := mustSeed(t), mustSeed(t); a == b {
		t.Errorf("two unset seeds are both %d: each run must draw its own", a)
	}
}

func mustSeed(t *testing.T) uint64 {
	t.Helper()
	s, err := soakSeed("", false)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Microsecond)
	return s
}
