package gateway

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
)

// The callers' Secrets: which of those spec.auth.apiKey.secretSelector
// selects the caller-auth SecurityPolicy uses, and their copies on the
// gateway cluster, delivered so that Envoy Gateway never reads one API key
// in two Secrets (choose). auth.go builds the policy and reports caller
// authentication.

// callerSecret is one selected caller Secret.
type callerSecret struct {
	// name on the control plane; remoteName on the gateway cluster.
	name, remoteName string
	// version is the control-plane Secret's resourceVersion.
	version string
	// clients counts its client IDs in use.
	clients int
	// ids are the client IDs its data holds, sorted.
	ids []string
	// empty: the Secret has no data, so there is nothing to copy.
	empty bool
	// problem says why Envoy Gateway could not use it; empty if it can.
	problem string
	// delivery is how far its copy has got.
	delivery remote.CopyState
	// inUse: the SecurityPolicy references it.
	inUse bool
	// holdVersion: its copy keeps the version it has while a new one
	// waits (choose), so provider-kubernetes does not deliver it yet.
	holdVersion bool
}

// holds reports whether a selected Secret has id as a client ID.
func (c *callers) holds(id string) bool {
	for _, s := range c.selected {
		if _, ok := slices.BinarySearch(s.ids, id); ok {
			return true
		}
	}
	return false
}

// names are the selected Secrets' names, in c.selected's order.
func (c *callers) names() []string {
	out := make([]string, len(c.selected))
	for i, s := range c.selected {
		out[i] = s.name
	}
	return out
}

// settled reports whether the copy holds the version of the Secret the
// function read: the provider synced the copy's spec, whose version is the
// Secret's resourceVersion. Only then does the function know which keys
// Envoy Gateway reads from it.
func (s callerSecret) settled() bool {
	return s.delivery.Delivered && s.delivery.AppliedVersion == s.version
}

// callers is what the function knows of the caller Secrets.
type callers struct {
	// resolved: Crossplane has fetched the selection.
	resolved bool
	// selected are the selected Secrets, by name.
	selected []callerSecret
	// inPolicy names the gateway-cluster Secrets the observed
	// SecurityPolicy references, as applied or as live.
	inPolicy map[string]bool
	// notes are mistakes that do not stop a Secret from being used.
	notes []string
	// waits say which Secret waits for what, so that Envoy Gateway never
	// reads one key in two Secrets at once: Normal results.
	waits []string
}

// readCallers reads the selected caller Secrets and decides which the
// policy uses. It compares API keys to find what Envoy Gateway would
// reject, but never copies a key anywhere: no message names one.
func (b builder) readCallers(req compose.Request) callers {
	c := callers{inPolicy: policyRefs(req.Observed[ResourceCallerAuth])}
	items, ok := req.Required[requireCallerSecrets]
	if !ok {
		return c
	}
	c.resolved = true
	sort.Slice(items, func(i, j int) bool { return itemName(items[i]) < itemName(items[j]) })
	data := map[string]map[string]any{}
	for _, it := range items {
		name := itemName(it)
		md, _ := it["metadata"].(map[string]any)
		s := callerSecret{name: name, remoteName: names.CallerSecret(b.in.GatewayName, name), delivery: remote.CopyStateAt(req.Observed, PrefixCallerSecret+name, names.CallerSecretVersionAnnotation)}
		s.version, _ = md["resourceVersion"].(string)
		d, _ := it["data"].(map[string]any)
		data[name] = d
		s.empty = len(d) == 0
		if s.empty {
			s.problem = fmt.Sprintf("caller Secret %q is not used: it has no data; add one entry per caller, the client ID as the key and its API key as the value", name)
		}
		s.ids = slices.Sorted(maps.Keys(d))
		for _, id := range s.ids {
			if k, _ := d[id].(string); k == "" && s.problem == "" {
				s.problem = fmt.Sprintf("caller Secret %q is not used: client ID %q has an empty API key; set one", name, id)
			}
		}
		c.selected = append(c.selected, s)
	}
	c.choose(data)
	return c
}

// choose marks the Secrets the policy uses, given each Secret's data, and
// which copies keep the version they have for now.
//
// Envoy Gateway reads the Secrets in credentialRefs order, skips a client
// ID it has seen, and rejects the whole policy ("duplicated API key"),
// which answers 500 on every route, when two clients share a key (gateway
// v1.8.3 internal/gatewayapi/securitypolicy.go, buildAPIKeyAuth). The
// policy lists the Secrets in name order; a Secret whose data would bring
// a duplicated key is left out, so the others keep working.
//
// The data the function compares is the control-plane Secrets' as it
// reads them now; what Envoy Gateway reads is each copy as
// provider-kubernetes last delivered it, and the live policy as the
// provider last applied it. The copies and the policy are separate
// Objects, delivered in any order, so a key moved from Secret A to Secret
// B can be in A's old copy and B's new one at once while the live policy
// names both. The function knows a copy's keys only once it is settled
// (it holds the version the function read). So:
//   - a copy joins the policy only once it is settled, and only while
//     every copy the observed policy names is settled too;
//   - of the copies the observed policy names that are not settled (a new
//     version on its way), the policy keeps one, the first by name, and
//     leaves the others out until they are settled;
//   - a named copy's new version is delivered only while every other copy
//     the observed or the desired policy names is settled and in the
//     desired policy (its keys compared with the new ones), and one the
//     desired policy leaves out only once the observed policy no longer
//     names it; until then its copy keeps the version it has.
//
// So Envoy Gateway reads at most one copy whose keys are changing, and
// the function has compared its new keys with every other copy it reads.
// provider-kubernetes also resolves the references when it re-reads an
// Object at its --poll interval, which no version annotation holds back:
// a Secret changed between two reconciles can reach its copy then.
func (c *callers) choose(data map[string]map[string]any) {
	unsettled := c.unsettledInPolicy()
	owner := map[string]string{} // client ID -> Secret that holds it
	keyOf := map[string]string{} // key -> client ID
	transit := ""                // the named copy on its way the policy keeps
	for i := range c.selected {
		s := &c.selected[i]
		if s.problem != "" || c.waitsToJoin(s, transit, unsettled) {
			continue
		}
		local, dups := s.checkKeys(data[s.name], owner, keyOf)
		if s.problem != "" {
			continue
		}
		c.notes = append(c.notes, dups...)
		for key, id := range local {
			keyOf[key] = id
			owner[id] = s.name
		}
		s.clients = len(local)
		s.inUse = true
		if !s.settled() {
			transit = s.name
		}
	}
	c.holdVersions()
}

// unsettledInPolicy are the copies the observed policy names whose keys
// the function does not know: not settled, or no longer selected.
func (c *callers) unsettledInPolicy() []string {
	byRemote := map[string]*callerSecret{}
	for i := range c.selected {
		byRemote[c.selected[i].remoteName] = &c.selected[i]
	}
	var unsettled []string
	for _, n := range slices.Sorted(maps.Keys(c.inPolicy)) {
		if s, ok := byRemote[n]; !ok || !s.settled() {
			unsettled = append(unsettled, n)
		}
	}
	return unsettled
}

// waitsToJoin reports whether s stays out of the policy in this
// reconcile (choose), and says why where a person may wonder.
func (c *callers) waitsToJoin(s *callerSecret, transit string, unsettled []string) bool {
	named := c.inPolicy[s.remoteName]
	switch {
	case !s.settled() && !named:
		// Not read by Envoy Gateway yet: it joins once delivered.
		return true
	case !s.settled() && transit != "":
		c.waits = append(c.waits, fmt.Sprintf("caller Secret %q is out of the caller-auth SecurityPolicy until its new version is delivered: Envoy Gateway reads only one caller Secret whose keys are changing at a time (now %q), because it rejects the whole policy if two Secrets hold one API key; its callers are denied meanwhile", s.name, transit))
		return true
	case s.settled() && !named && len(unsettled) > 0:
		c.waits = append(c.waits, fmt.Sprintf("caller Secret %q joins the caller-auth SecurityPolicy once the copies it names are delivered (%s), so that Envoy Gateway never reads one API key in two Secrets", s.name, compose.QuoteAll(unsettled)))
		return true
	}
	return false
}

// checkKeys compares the keys of s (its data, client ID to key) with those
// of the Secrets already in use (owner, keyOf), and returns its own keys
// (key to client ID) and notes on client IDs another Secret holds. A key
// another client holds, here or in s, leaves s out: it sets s.problem.
func (s *callerSecret) checkKeys(data map[string]any, owner, keyOf map[string]string) (map[string]string, []string) {
	local := map[string]string{}
	var dups []string
	for _, id := range slices.Sorted(maps.Keys(data)) {
		if prev, seen := owner[id]; seen {
			dups = append(dups, fmt.Sprintf("client ID %q is in the caller Secrets %q and %q; Envoy Gateway uses the key in %q, the first by name, and ignores the other; keep each client ID in one Secret", id, prev, s.name, prev))
			continue
		}
		key, _ := data[id].(string)
		other, dup := keyOf[key]
		if !dup {
			other, dup = local[key]
		}
		if dup {
			s.problem = fmt.Sprintf("caller Secret %q is not used: client ID %q has the same API key as client ID %q, and Envoy Gateway rejects a policy with a duplicated API key, which would deny every caller; give each client its own key", s.name, id, other)
			return nil, nil
		}
		local[key] = id
	}
	return local, dups
}

// holdVersions decides which copies keep the version they have (choose).
func (c *callers) holdVersions() {
	unchecked := c.uncheckedCopies()
	for i := range c.selected {
		s := &c.selected[i]
		if s.settled() || !s.delivery.MayReference || s.delivery.AppliedVersion == "" {
			// Settled, or not delivered at any version yet: nothing to hold.
			continue
		}
		named := c.inPolicy[s.remoteName]
		var others []string
		for _, n := range slices.Sorted(maps.Keys(unchecked)) {
			if n != s.remoteName {
				others = append(others, n)
			}
		}
		switch {
		case !named && !s.inUse:
			// Envoy Gateway does not read it.
		case s.inUse && len(others) == 0:
			// The only copy on its way: its new keys were compared with
			// every other copy Envoy Gateway reads.
		case !s.inUse:
			s.holdVersion = true
			c.waits = append(c.waits, fmt.Sprintf("the new version of caller Secret %q waits until the caller-auth SecurityPolicy no longer names its copy, so that Envoy Gateway never reads one API key in two Secrets", s.name))
		default:
			s.holdVersion = true
			c.waits = append(c.waits, fmt.Sprintf("the new version of caller Secret %q waits until the copies %s are delivered or out of the caller-auth SecurityPolicy, so that Envoy Gateway never reads one API key in two Secrets", s.name, compose.QuoteAll(others)))
		}
	}
}

// uncheckedCopies are the copies Envoy Gateway may read (the observed or
// the desired policy names them) whose keys the function has not compared
// with the others': all but those settled and in use.
func (c *callers) uncheckedCopies() map[string]bool {
	unchecked := map[string]bool{}
	for n := range c.inPolicy {
		unchecked[n] = true
	}
	for _, s := range c.selected {
		switch {
		case s.settled() && s.inUse:
			delete(unchecked, s.remoteName)
		case s.inUse:
			unchecked[s.remoteName] = true
		}
	}
	return unchecked
}

// inUse lists the Secrets the SecurityPolicy references: those Envoy
// Gateway can use, once their copy has reached the gateway cluster or
// while the observed policy already references them, so a rotation that
// is being copied does not drop a Secret (unless another is being copied
// at the same time: choose). Envoy Gateway rejects a policy that
// references a Secret that does not exist (validateSecretRef), and a
// rejected policy answers 500 on every route it targets.
func (c callers) inUse() []callerSecret {
	var out []callerSecret
	for _, s := range c.selected {
		if s.inUse {
			out = append(out, s)
		}
	}
	return out
}

// implied adds the composition resource names caller authentication
// implies: the policy, every selected Secret, and every observed copy the
// observed policy still references, so that no Secret is deleted while
// Envoy Gateway may read it. Before Crossplane has fetched the selection,
// every observed copy is implied.
func (b builder) impliedCallers(c callers, obs map[string]remote.Observed, implied map[string]bool) {
	if b.spec.AuthEnabled() {
		implied[ResourceCallerAuth] = true
	}
	for _, s := range c.selected {
		if b.spec.AuthEnabled() {
			implied[PrefixCallerSecret+s.name] = true
		}
	}
	for n := range obs {
		name, ok := strings.CutPrefix(n, PrefixCallerSecret)
		if !ok {
			continue
		}
		if c.inPolicy[names.CallerSecret(b.in.GatewayName, name)] || (b.spec.AuthEnabled() && !c.resolved) {
			implied[n] = true
		}
	}
}

// composeCallers adds the caller Secrets' copies and the SecurityPolicy.
// Nothing is built before Crossplane has fetched the selection: what was
// composed is carried forward instead.
func (b builder) composeCallers(c callers, policyAccepted bool, res map[string]compose.Desired) {
	if !b.spec.AuthEnabled() || !c.resolved {
		return
	}
	for _, s := range c.selected {
		if s.empty {
			// No data to copy: provider-kubernetes would fail to
			// resolve the reference.
			continue
		}
		version := s.version
		if s.holdVersion {
			// The spec stays as applied, so the provider does not apply
			// the copy again now (choose).
			version = s.delivery.AppliedVersion
		}
		cp := remote.SecretCopy{
			Meta: b.meta(s.remoteName), Type: "Opaque",
			// The whole data map: every client ID of the Secret.
			Name: s.name, Namespace: b.in.ObjectNamespace, Keys: []remote.KeyCopy{{FieldPath: "data", ToFieldPath: "data"}},
			Version: version, VersionAnnotation: names.CallerSecretVersionAnnotation,
		}
		// Ready while a copy with values is there, a new version on its
		// way included, so the composite does not flap on a rotation.
		ready := s.delivery.Delivered || s.delivery.LiveVersion != ""
		res[PrefixCallerSecret+s.name] = compose.Desired{Object: cp.Object(b.spec.ProviderConfigName, s.delivery.MayReference, remote.InNamespace(b.in.ObjectNamespace)), Ready: ready}
	}
	res[ResourceCallerAuth] = compose.Desired{Object: b.callerPolicy(c.inUse()), Ready: policyAccepted}
}

// callerRequirements asks for the selected caller Secrets.
func (b builder) callerRequirements() map[string]compose.Requirement {
	if !b.spec.AuthEnabled() {
		return nil
	}
	return map[string]compose.Requirement{requireCallerSecrets: {
		APIVersion: "v1", Kind: "Secret", Namespace: b.in.ObjectNamespace,
		MatchLabels: b.spec.Auth.APIKey.SecretSelector.MatchLabels,
	}}
}

// policyRefs names the Secrets an observed caller-auth SecurityPolicy
// references, in the spec last applied and in the live object, which
// differ until the provider has applied a change.
func policyRefs(o remote.Observed) map[string]bool {
	out := map[string]bool{}
	for _, m := range []map[string]any{o.Applied(), o.Manifest()} {
		refs, _, _ := unstructured.NestedSlice(m, "spec", "apiKeyAuth", "credentialRefs")
		for _, r := range refs {
			rm, _ := r.(map[string]any)
			if n, _ := rm["name"].(string); n != "" {
				out[n] = true
			}
		}
	}
	return out
}

func itemName(it map[string]any) string {
	md, _ := it["metadata"].(map[string]any)
	n, _ := md["name"].(string)
	return n
}
