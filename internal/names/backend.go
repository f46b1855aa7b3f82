package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// A ModelRoute's backend objects on the gateway cluster. Every ModelRoute
// of one control-plane namespace composes into the same team namespace, so
// their names must never meet: two routes writing one Backend would fight,
// and one model's traffic could go to the other's backend. Joining the
// route's and the backend's names with "-", as the function did first, is
// not injective (route a with backend b-c, route a-b with backend c). The
// names below are, per kind, over every route and backend name the XRD
// admits (a route's name is a DNS subdomain, a backend's a DNS label, so
// neither ends in "-"):
//
//   - Backend, AIServiceBackend, BackendSecurityPolicy and the API key's
//     Secret share BackendObject. Plain: <route>-<backend>, for a backend
//     without "-" (and not "ca"); its last "-" splits it back. Dotted:
//     <route>-<backend with each "-" made ".">, for a backend with "-"
//     (none doubled); its last segment holds a dot, which no plain name's
//     does, and its last "-" splits it back. Both at most MaxPlain
//     characters. Hashed, for every other pair: <start>--<16 hex>, a hash
//     of the name's role, the route and the backend. No plain or dotted
//     name ends in "--" and a segment: the route before it would end in
//     "-".
//   - The CA's copy (a Secret or a ConfigMap): BackendCA, the object's
//     plain or dotted name with "-ca", or hashed with its own role. No
//     plain object name ends in "-ca" (a backend named ca is hashed), and
//     no dotted one ends in a segment without a dot.
//   - The route's sources ConfigMap: Child(route, "sources"), which ends
//     in "-sources" or, past 63 characters, in "-" and five hex
//     characters: never in "-ca", and never in "--" and 16 hex.
//
// Plain names are what the function composed before; the others were
// <route>-<backend> too, or Child's shorter hash, and are renamed:
// BackendRenamed says which, and package route moves their objects over
// without a moment in which the serving route names a missing object.

// MaxPlain is the longest plain or dotted backend object name, so that its
// CA copy's name, with "-ca", fits in 63 characters.
const MaxPlain = maxName - len(caSuffix)

// caSuffix ends the name of a backend's CA copy.
const caSuffix = "-ca"

// Roles of a hashed backend name: two names of one backend never share a
// hash.
const (
	roleObject = "object"
	roleCA     = "ca"
)

// hashedLen is how many hex characters a hashed backend name ends in: 64
// bits, which no one can match by trying names.
const hashedLen = 16

// BackendObject names the Backend, AIServiceBackend, BackendSecurityPolicy
// and API-key Secret of the ModelRoute route's backend backend.
func BackendObject(route, backend string) string {
	if n, ok := plainOrDotted(route, backend); ok {
		return n
	}
	return hashedBackend(roleObject, route, backend)
}

// BackendCA names the copy of the backend's CA, a Secret or a ConfigMap.
func BackendCA(route, backend string) string {
	if n, ok := plainOrDotted(route, backend); ok {
		return n + caSuffix
	}
	return hashedBackend(roleCA, route, backend)
}

// LegacyBackendObject and LegacyBackendCA are the names the function gave
// these objects before BackendObject and BackendCA.
func LegacyBackendObject(route, backend string) string { return Child(route, backend) }

// LegacyBackendCA is the name the function gave a backend's CA copy before
// BackendCA.
func LegacyBackendCA(route, backend string) string { return Child(route, backend+caSuffix) }

// BackendRenamed reports whether BackendObject and BackendCA differ from
// the names the function gave before: they differ, or agree, together.
func BackendRenamed(route, backend string) bool {
	return BackendObject(route, backend) != LegacyBackendObject(route, backend)
}

// plainOrDotted is the plain or dotted name, if the pair has one.
func plainOrDotted(route, backend string) (string, bool) {
	// A backend named ca would end in the CA copies' suffix.
	if len(route)+1+len(backend) > MaxPlain || backend == strings.TrimPrefix(caSuffix, "-") || strings.Contains(backend, "--") {
		return "", false
	}
	return route + "-" + strings.ReplaceAll(backend, "-", "."), true
}

// hashedBackend is the hashed name: the start of <route>-<backend>, dots
// made dashes, then "--" and the hash, at most 63 characters. The hash
// covers the role and both names, separated by a byte neither name can
// hold.
func hashedBackend(role, route, backend string) string {
	sum := sha256.Sum256([]byte(role + "\x00" + route + "\x00" + backend))
	h := hex.EncodeToString(sum[:])[:hashedLen]
	base := strings.ReplaceAll(route+"-"+backend, ".", "-")
	return base[:min(len(base), maxName-2-hashedLen)] + "--" + h
}
