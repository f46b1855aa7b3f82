package fn

import (
	"os"
	"strings"
	"testing"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/route"
)

// notInREADMEYet names reasons whose rows the README, rewritten on another
// branch, does not have yet; the branch that adds the rows empties it.
var notInREADMEYet = map[string]bool{
	gateway.ReasonTLSSecretMissing:     true,
	gateway.ReasonCallerSecretsMissing: true,
}

// TestREADMEConditions checks the README's table of conditions lists every
// reason the function can report, so the two cannot drift apart.
func TestREADMEConditions(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	reasons := map[string][]string{
		gateway.ConditionType: {
			gateway.ReasonReady, gateway.ReasonClusterAlreadyHasGateway, gateway.ReasonWaitingForPreviousGateway, gateway.ReasonTLSSecretMissing, gateway.ReasonCallerSecretsMissing, gateway.ReasonNotProgrammed, gateway.ReasonListenersNotProgrammed, gateway.ReasonAnchorNotAccepted, gateway.ReasonClientPolicyNotAccepted, gateway.ReasonCallerAuthNotAccepted, gateway.ReasonDeploymentNotObserved,
			gateway.ReasonGenerationNotObserved, gateway.ReasonExtProcMarkerMissing, gateway.ReasonOldReplicasPresent, gateway.ReasonNoReplicaAvailable,
		},
		route.ConditionType: {route.ReasonAccepted, route.ReasonWaitingForGateway, route.ReasonGatewayNotReporting, route.ReasonGatewayLostCluster, route.ReasonGatewayStatusStale, route.ReasonNoUsableBackends, route.ReasonWaitingForCredentials, route.ReasonWaitingForRoute, route.ReasonHTTPRouteNotAccepted},
	}
	for typ, rs := range reasons {
		for _, r := range rs {
			if notInREADMEYet[r] && !strings.Contains(readme, "`"+r+"`") {
				t.Logf("README.md has no row for %s reason %s yet (notInREADMEYet)", typ, r)
				continue
			}
			row := "| `" + typ + "` | "
			found := false
			for l := range strings.SplitSeq(readme, "\n") {
				found = found || strings.HasPrefix(l, row) && strings.Contains(l, "| `"+r+"` |")
			}
			if !found {
				t.Errorf("README.md's conditions table has no row for %s reason %s", typ, r)
			}
		}
	}
}
