package controlplane

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// replaySummary renders the replays: how many, of which XRs and
// conditions, how long the ones judged replays stood, and the ones that
// stood past ReplayBound and were judged as verdicts.
func replaySummary(rs []harness.Replay) string {
	if len(rs) == 0 {
		return "none"
	}
	byXR := map[string]int{}
	var longest time.Duration
	var stood []string
	for _, r := range rs {
		byXR[r.XR+" "+r.CondType]++
		if r.Stood {
			stood = append(stood, fmt.Sprintf("%s %s %s=%s (%s) for %s", r.At.Format("15:04:05.000"), r.XR, r.CondType, r.Status, r.Reason, r.Over.Round(time.Millisecond)))
			continue
		}
		longest = max(longest, r.Over)
	}
	keys := make([]string, 0, len(byXR))
	for k := range byXR {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, byXR[k])
	}
	s := fmt.Sprintf("%d (%s); the longest of those undone within %s stood %s", len(rs), strings.Join(parts, ", "), harness.ReplayBound, longest.Round(time.Millisecond))
	if len(stood) > 0 {
		s += fmt.Sprintf("; %d stood past %s and were judged as the function's verdict: %s", len(stood), harness.ReplayBound, strings.Join(stood, "; "))
	}
	return s
}
