package fn

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
)

// TestCallerAuthProperties runs the InferenceGateway on random callers'
// Secrets, copies and observed policies, and checks what must hold
// whatever the history, each property stated from Envoy Gateway's side:
//   - the desired SecurityPolicy names only copies that are desired too, so
//     Envoy Gateway never looks for a Secret the same reconcile deletes;
//   - every copy the observed policy names stays desired, for the same
//     reason one reconcile later;
//   - the Secrets the desired policy names, read as Envoy Gateway reads them
//     (in order, a seen client ID skipped), never share a key, never have an
//     empty one, and are all selected;
//   - with auth and nothing usable, the policy denies and GatewayReady is
//     False; GatewayReady True means a policy Envoy Gateway accepted;
//   - no caller key appears anywhere in the response;
//   - the desired policy names at most one copy that is not settled (does
//     not hold the version of its Secret the function read), and only one
//     the observed policy names already;
//   - a copy's new version goes out (its desired version annotation moves)
//     while the observed or the desired policy names it only if the
//     desired policy keeps it and every other copy either policy names is
//     settled and in the desired policy, its keys compared with the new
//     ones.
//
// TestCallerKeyMoveNeverDuplicated checks the same over reconciles.
func TestCallerAuthProperties(t *testing.T) {
	const seeds = 2000
	r := rand.New(rand.NewPCG(13, 14))
	keys := []string{b64("sk-one-0000000001"), b64("sk-two-0000000002"), b64("sk-three-000000003"), ""}
	for i := range seeds {
		name := fmt.Sprintf("case %d", i)
		spec := authSpec()
		auth := r.IntN(10) != 0
		if !auth {
			delete(spec, "auth")
		}
		required := map[string][]obj{}
		selected := map[string]obj{}
		if r.IntN(10) == 0 {
			required = nil // not fetched yet
		} else {
			required["caller-secrets"] = []obj{}
			for _, n := range []string{"a", "b", "c"} {
				if r.IntN(2) == 0 {
					continue
				}
				data := obj{}
				for _, id := range []string{"alice", "bob", "carol"} {
					if r.IntN(2) == 0 {
						data[id] = keys[r.IntN(len(keys))]
					}
				}
				s := callerSecret(n, fmt.Sprint(r.IntN(9)+1), data)
				selected[n] = s
				required["caller-secrets"] = append(required["caller-secrets"], s)
			}
		}
		extra := map[string]obj{}
		var observedRefs []string
		for _, n := range []string{"a", "b", "c"} {
			// The version the copy holds: the selected Secret's, or an
			// older one.
			version := "0"
			if s, ok := selected[n]; ok && r.IntN(2) == 0 {
				version = s["metadata"].(obj)["resourceVersion"].(string)
			}
			switch r.IntN(4) {
			case 1:
				extra["caller-secret-"+n] = callerCopy(n, "")
			case 2:
				extra["caller-secret-"+n] = callerCopy(n, version)
			case 3:
				c := callerCopy(n, version)
				c["metadata"].(obj)["generation"] = 2
				extra["caller-secret-"+n] = c
			}
			if r.IntN(3) == 0 {
				observedRefs = append(observedRefs, "inference-gateway-callers-"+n)
			}
		}
		if r.IntN(4) != 0 {
			extra["caller-auth"] = callerPolicyObject(r.IntN(3) != 0, "", observedRefs...)
		}
		rsp := run(t, newRequest(t, gatewayXR(spec), authObserved(extra), required))
		desired := rsp.GetDesired().GetResources()
		for _, res := range rsp.GetResults() {
			if res.GetSeverity().String() == "SEVERITY_FATAL" {
				t.Fatalf("%s: unexpected Fatal: %s", name, res.GetMessage())
			}
		}

		// The copies the observed policy names stay desired.
		for _, ref := range observedRefs {
			n := strings.TrimPrefix(ref, "inference-gateway-callers-")
			if _, obs := extra["caller-secret-"+n]; obs && extra["caller-auth"] != nil && desired["caller-secret-"+n] == nil {
				t.Fatalf("%s: the observed policy names the copy of %q, but it is no longer desired: Envoy Gateway would reject the policy", name, n)
			}
		}

		policy := manifest(rsp, "caller-auth")
		if auth && required != nil && policy == nil {
			t.Fatalf("%s: auth is set and the Secrets were fetched, but no SecurityPolicy is desired", name)
		}
		if !auth && policy != nil {
			t.Fatalf("%s: no auth, but a SecurityPolicy is desired", name)
		}
		gw := condition(rsp, "GatewayReady")
		if policy != nil && required != nil {
			var refs []string
			if k, ok := policy["spec"].(obj)["apiKeyAuth"].(obj); ok {
				for _, x := range k["credentialRefs"].([]any) {
					refs = append(refs, x.(obj)["name"].(string))
				}
			}
			seenKeys, seenClients := map[string]bool{}, map[string]bool{}
			for _, ref := range refs {
				n := strings.TrimPrefix(ref, "inference-gateway-callers-")
				if desired["caller-secret-"+n] == nil {
					t.Fatalf("%s: the policy names %q, whose copy is not desired", name, ref)
				}
				s, ok := selected[n]
				if !ok {
					t.Fatalf("%s: the policy names %q, whose Secret is not selected", name, ref)
				}
				data, _ := s["data"].(obj)
				if len(data) == 0 {
					t.Fatalf("%s: the policy names %q, whose Secret has no data", name, ref)
				}
				for _, id := range sortedKeys(data) {
					if seenClients[id] {
						continue
					}
					k := data[id].(string)
					if k == "" || seenKeys[k] {
						t.Fatalf("%s: Envoy Gateway would reject the policy: %q has an empty or duplicated key for %q (policy refs %v, selected %v)", name, ref, id, refs, selected)
					}
					seenKeys[k], seenClients[id] = true, true
				}
			}
			// Envoy Gateway reads at most one copy whose keys are
			// changing, and a copy's new version goes out only while every
			// other copy it may read is settled and compared with it.
			settled := func(n string) bool {
				c, ok := extra["caller-secret-"+n]
				s, sel := selected[n]
				if !ok || !sel || c["metadata"].(obj)["generation"] != 1 || c["spec"].(obj)["references"] == nil {
					return false
				}
				a, _ := c["spec"].(obj)["forProvider"].(obj)["manifest"].(obj)["metadata"].(obj)["annotations"].(obj)
				return a["modelplane.ai/callers-version"] == s["metadata"].(obj)["resourceVersion"]
			}
			named := map[string]bool{} // by the observed or the desired policy
			if extra["caller-auth"] != nil {
				for _, ref := range observedRefs {
					named[strings.TrimPrefix(ref, "inference-gateway-callers-")] = true
				}
			}
			inPolicy := map[string]bool{}
			var changing []string
			for _, ref := range refs {
				n := strings.TrimPrefix(ref, "inference-gateway-callers-")
				named[n], inPolicy[n] = true, true
				if !settled(n) {
					changing = append(changing, n)
				}
				if !settled(n) && (extra["caller-auth"] == nil || !slices.Contains(observedRefs, ref)) {
					t.Fatalf("%s: the policy names %q, whose copy is not settled and which the observed policy does not name yet", name, ref)
				}
			}
			if len(changing) > 1 {
				t.Fatalf("%s: the policy names %v, more than one copy whose keys are changing", name, changing)
			}
			for n, s := range selected {
				c, ok := extra["caller-secret-"+n]
				d := manifest(rsp, "caller-secret-"+n)
				if !ok || d == nil || c["spec"].(obj)["references"] == nil || !named[n] {
					continue
				}
				applied, _ := c["spec"].(obj)["forProvider"].(obj)["manifest"].(obj)["metadata"].(obj)["annotations"].(obj)
				want, _ := d["metadata"].(obj)["annotations"].(obj)
				if applied["modelplane.ai/callers-version"] == want["modelplane.ai/callers-version"] || want["modelplane.ai/callers-version"] != s["metadata"].(obj)["resourceVersion"] {
					continue // no new version goes out
				}
				if !inPolicy[n] {
					t.Fatalf("%s: the new version of %q goes out while the observed policy names it and the desired one leaves it out", name, n)
				}
				for o := range named {
					if o != n && (!settled(o) || !inPolicy[o]) {
						t.Fatalf("%s: the new version of %q goes out while Envoy Gateway may read %q, whose keys were not compared with it", name, n, o)
					}
				}
			}
			if len(refs) == 0 {
				if a, _ := policy["spec"].(obj)["authorization"].(obj); a["defaultAction"] != "Deny" {
					t.Fatalf("%s: with no usable Secret the policy must deny everything, got %v", name, policy["spec"])
				}
				if gw.GetStatus().String() == "STATUS_CONDITION_TRUE" {
					t.Fatalf("%s: GatewayReady is True while every caller is denied", name)
				}
			}
		}
		if auth && gw.GetStatus().String() == "STATUS_CONDITION_TRUE" {
			p := extra["caller-auth"]
			if p == nil || !strings.Contains(fmt.Sprint(p["status"]), "Accepted") || policy == nil {
				t.Fatalf("%s: GatewayReady True without an accepted SecurityPolicy", name)
			}
		}
		out, err := protojson.Marshal(rsp)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys[:3] {
			if strings.Contains(string(out), k) {
				t.Fatalf("%s: a caller key leaked into the response", name)
			}
		}
	}
}

func sortedKeys(m obj) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
