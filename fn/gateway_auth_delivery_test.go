package fn

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// callerWorld is the control plane and the gateway cluster as far as
// caller authentication goes, for tests that let Crossplane,
// provider-kubernetes and Envoy Gateway act in every order between
// reconciles.
type callerWorld struct {
	// data and version of each control-plane caller Secret, by name.
	data    map[string]obj
	version map[string]int
	// observed are the caller Objects (caller-secret-*, caller-auth) as
	// Crossplane would send them.
	observed map[string]obj
	// live is the data of each copy on the gateway cluster, by Secret
	// name, as provider-kubernetes last delivered it.
	live map[string]obj
	// edits not made yet, by name.
	edits map[string]func(w *callerWorld)
	// last is the last reconcile's response.
	last *fnv1.RunFunctionResponse
}

func (w *callerWorld) clone(t testing.TB) *callerWorld {
	b, err := json.Marshal(struct {
		D, O, L map[string]obj
		V       map[string]int
	}{w.data, w.observed, w.live, w.version})
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		D, O, L map[string]obj
		V       map[string]int
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return &callerWorld{data: c.D, version: c.V, observed: c.O, live: c.L, edits: maps.Clone(w.edits), last: w.last}
}

// clients are the client IDs of each live copy, never its keys.
func (w *callerWorld) clients() map[string][]string {
	out := map[string][]string{}
	for n, d := range w.live {
		out[n] = sortedKeys(d)
	}
	return out
}

// key identifies the world's state for the search.
func (w *callerWorld) key(t testing.TB) string {
	b, err := json.Marshal(struct {
		D, O, L map[string]obj
		V       map[string]int
		E       []string
	}{w.data, w.observed, w.live, w.version, slices.Sorted(maps.Keys(w.edits))})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (w *callerWorld) required() map[string][]obj {
	var items []obj
	for _, n := range slices.Sorted(maps.Keys(w.data)) {
		items = append(items, callerSecret(n, fmt.Sprint(w.version[n]), w.data[n]))
	}
	return map[string][]obj{"caller-secrets": items}
}

// reconcile runs the function, and Crossplane applies what it desires of
// caller authentication and deletes what it no longer desires.
func (w *callerWorld) reconcile(t testing.TB) {
	t.Helper()
	rsp := run(t, newRequest(t, gatewayXR(authSpec()), authObserved(w.observed), w.required()))
	w.last = rsp
	for n := range rsp.GetDesired().GetResources() {
		if n == "caller-auth" || strings.HasPrefix(n, "caller-secret-") {
			w.observed[n] = applyDesired(t, w.observed[n], rsp, n)
		}
	}
	for n := range w.observed {
		if rsp.GetDesired().GetResources()[n] == nil {
			delete(w.observed, n)
			delete(w.live, strings.TrimPrefix(n, "caller-secret-"))
		}
	}
}

// pending lists the Objects whose current spec the provider has not
// synced.
func (w *callerWorld) pending() []string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(w.observed)) {
		o := w.observed[n]
		gen := o["metadata"].(obj)["generation"]
		synced := false
		st, _ := o["status"].(obj)
		conds, _ := st["conditions"].([]any)
		for _, c := range conds {
			if c.(obj)["type"] == "Synced" && c.(obj)["observedGeneration"] == gen {
				synced = true
			}
		}
		if !synced {
			out = append(out, n)
		}
	}
	return out
}

// sync is provider-kubernetes reconciling the Object n: a copy with
// references gets the control-plane Secret's data as it is now (resolved
// when the provider applies), one without the placeholder, no data.
func (w *callerWorld) sync(t testing.TB, n string) {
	t.Helper()
	o := providerSyncs(t, w.observed[n])
	if name, ok := strings.CutPrefix(n, "caller-secret-"); ok {
		if refs, _ := o["spec"].(obj)["references"].([]any); len(refs) > 0 {
			w.live[name] = maps.Clone(w.data[name])
		} else if _, ok := w.live[name]; !ok {
			w.live[name] = obj{}
		}
	}
	w.observed[n] = o
	w.envoyGateway(t)
}

// liveRefs are the copies the live policy names, by Secret name.
func (w *callerWorld) liveRefs() []string {
	p, ok := w.observed["caller-auth"]
	if !ok {
		return nil
	}
	st, _ := p["status"].(obj)
	ap, _ := st["atProvider"].(obj)
	m, _ := ap["manifest"].(obj)
	spec, _ := m["spec"].(obj)
	k, _ := spec["apiKeyAuth"].(obj)
	refs, _ := k["credentialRefs"].([]any)
	var out []string
	for _, r := range refs {
		out = append(out, strings.TrimPrefix(r.(obj)["name"].(string), "inference-gateway-callers-"))
	}
	return out
}

// verdict is Envoy Gateway's on the live policy and copies, as
// buildAPIKeyAuth reads them (gateway v1.8.3
// internal/gatewayapi/securitypolicy.go): the refs in order, a client ID
// seen before skipped, a key seen before rejecting the whole policy; a
// missing Secret rejects it too.
func (w *callerWorld) verdict() error {
	seenKeys, seenClients := map[string]bool{}, map[string]bool{}
	for _, n := range w.liveRefs() {
		d, ok := w.live[n]
		if !ok {
			return fmt.Errorf("secret %s does not exist", n)
		}
		for _, id := range sortedKeys(d) {
			if seenClients[id] {
				continue
			}
			k := d[id].(string)
			if seenKeys[k] {
				return fmt.Errorf("duplicated API key (in %s, client %s)", n, id)
			}
			seenKeys[k], seenClients[id] = true, true
		}
	}
	return nil
}

// envoyGateway writes its verdict into the live policy's status.
func (w *callerWorld) envoyGateway(t testing.TB) {
	p, ok := w.observed["caller-auth"]
	if !ok {
		return
	}
	st, _ := p["status"].(obj)
	ap, _ := st["atProvider"].(obj)
	m, _ := ap["manifest"].(obj)
	if m == nil {
		return
	}
	err := w.verdict()
	msg := "Policy has been accepted."
	if err != nil {
		msg = err.Error()
	}
	m["status"] = policyManifest("SecurityPolicy", err == nil)["status"]
	m["status"].(obj)["ancestors"].([]any)[0].(obj)["conditions"] = []any{cond("Accepted", err == nil, "Accepted", msg)}
}

// inUse are the Secrets the last reconcile reported in use.
func (w *callerWorld) inUse() []string {
	st := status(w.last)
	a, _ := st["auth"].(obj)
	var out []string
	for _, s := range a["secrets"].([]any) {
		out = append(out, s.(string))
	}
	return out
}

// exploreCallers explores every order in which the function reconciles,
// the user makes the edits, and provider-kubernetes syncs each pending
// Object, up to depth actions, and checks after every action that Envoy
// Gateway accepts the live policy (never a duplicated key, never a
// missing Secret), and after every reconcile that GatewayReady is True
// and every caller copy Ready (each starts delivered).
// At every quiet state (nothing pending, no edit left, and a reconcile
// changes nothing) want must hold.
func exploreCallers(t *testing.T, start *callerWorld, depth int, want func(*callerWorld) error) {
	seen := map[string]int{} // state -> the most actions left when it was explored
	quiet := 0
	var path []string
	var walk func(w *callerWorld, d int)
	walk = func(w *callerWorld, d int) {
		if t.Failed() || d == 0 {
			return
		}
		k := w.key(t)
		if seen[k] >= d {
			return
		}
		seen[k] = d
		type action struct {
			name string
			do   func(*callerWorld)
		}
		acts := []action{{"reconcile", func(w *callerWorld) { w.reconcile(t) }}}
		for _, n := range w.pending() {
			acts = append(acts, action{"sync " + n, func(w *callerWorld) { w.sync(t, n) }})
		}
		for _, e := range slices.Sorted(maps.Keys(w.edits)) {
			acts = append(acts, action{"edit " + e, func(w *callerWorld) { f := w.edits[e]; delete(w.edits, e); f(w); w.envoyGateway(t) }})
		}
		for _, a := range acts {
			next := w.clone(t)
			a.do(next)
			path = append(path, a.name)
			if err := next.verdict(); err != nil {
				t.Fatalf("Envoy Gateway rejects the live policy (%v) after %s; live refs %v, client IDs of the live copies %v", err, strings.Join(path, ", "), next.liveRefs(), next.clients())
			}
			if a.name == "reconcile" {
				if c := condition(next.last, "GatewayReady"); c.GetStatus() != fnv1.Status_STATUS_CONDITION_TRUE {
					t.Fatalf("GatewayReady flapped to %s after %s: %s", c.GetReason(), strings.Join(path, ", "), c.GetMessage())
				}
				// Every copy started delivered: each stays Ready, so the
				// composite's readiness does not flap either.
				for n, r := range next.last.GetDesired().GetResources() {
					if strings.HasPrefix(n, "caller-secret-") && r.GetReady() != fnv1.Ready_READY_TRUE {
						t.Fatalf("the copy %s is %s after %s, while a version of it serves", n, r.GetReady(), strings.Join(path, ", "))
					}
				}
			}
			if a.name == "reconcile" && len(w.pending()) == 0 && len(w.edits) == 0 && next.key(t) == w.key(t) {
				if err := want(next); err != nil {
					t.Fatalf("quiet after %s: %v", strings.Join(path, ", "), err)
				}
				quiet++
			}
			walk(next, d-1)
			path = path[:len(path)-1]
		}
	}
	walk(start, depth)
	if len(seen) < 3 || quiet == 0 {
		t.Fatalf("explored only %d states, %d of them quiet; the search proves nothing", len(seen), quiet)
	}
	t.Logf("explored %d states, %d of them quiet", len(seen), quiet)
}

// settledWorld is team-a and team-b delivered and in force: the function
// has reconciled and the provider synced everything until quiet.
func settledWorld(t *testing.T, data map[string]obj) *callerWorld {
	w := &callerWorld{data: data, version: map[string]int{}, observed: map[string]obj{}, live: map[string]obj{}, edits: map[string]func(*callerWorld){}}
	for n := range data {
		w.version[n] = 1
	}
	for range 8 {
		w.reconcile(t)
		for _, n := range w.pending() {
			w.sync(t, n)
		}
	}
	if got := summarize(w.last).Conditions[0]; got != "GatewayReady=STATUS_CONDITION_TRUE/Serving" || len(w.pending()) > 0 {
		t.Fatalf("the starting world is not settled: %s, pending %v", got, w.pending())
	}
	return w
}

func edit(name string, data obj) func(*callerWorld) {
	return func(w *callerWorld) { w.data[name] = data; w.version[name]++ }
}

// TestCallerKeyMoveNeverDuplicated moves alice's key from team-a to
// team-b under a new client ID, carol: two edits, in either order, with
// the function reconciling and provider-kubernetes syncing the copies and
// the policy in every order in between. Envoy Gateway must never read the
// key in two copies at once (it would reject the whole SecurityPolicy and
// answer 500 on every route), and once quiet both Secrets are in force
// with GatewayReady True.
func TestCallerKeyMoveNeverDuplicated(t *testing.T) {
	w := settledWorld(t, map[string]obj{
		"team-a": {"alice": b64(aliceKey), "dave": b64("sk-dave-0000000000000")},
		"team-b": {"bob": b64(bobKey)},
	})
	if diff := slices.Compare(w.inUse(), []string{"team-a", "team-b"}); diff != 0 {
		t.Fatalf("in use at the start: %v", w.inUse())
	}
	w.edits["remove alice from team-a"] = edit("team-a", obj{"dave": b64("sk-dave-0000000000000")})
	w.edits["add carol to team-b with alice's key"] = edit("team-b", obj{"bob": b64(bobKey), "carol": b64(aliceKey)})
	exploreCallers(t, w, 14, bothInForce)
}

// bothInForce: GatewayReady is True with team-a and team-b in force.
func bothInForce(w *callerWorld) error {
	if got := summarize(w.last).Conditions[0]; got != "GatewayReady=STATUS_CONDITION_TRUE/Serving" {
		return fmt.Errorf("GatewayReady is %s: %s", got, condition(w.last, "GatewayReady").GetMessage())
	}
	if got := w.inUse(); !slices.Equal(got, []string{"team-a", "team-b"}) {
		return fmt.Errorf("in use: %v, want both", got)
	}
	return nil
}

// TestCallerRotationKeepsGatewayReady rotates alice's key in team-a:
// through every order of reconciles and syncs, GatewayReady stays True
// with both Secrets in force, and Envoy Gateway accepts the live policy.
func TestCallerRotationKeepsGatewayReady(t *testing.T) {
	w := settledWorld(t, map[string]obj{
		"team-a": {"alice": b64(aliceKey)},
		"team-b": {"bob": b64(bobKey)},
	})
	w.edits["rotate alice"] = edit("team-a", obj{"alice": b64(carolKey)})
	exploreCallers(t, w, 12, bothInForce)
}
