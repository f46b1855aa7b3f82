package route

import (
	"strings"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
)

// Where a backend's objects are on the gateway cluster, and how those of a
// backend the function renamed move (names.BackendRenamed says which are;
// internal/names/backend.go why).
//
// A renamed backend's objects are composed under new composition keys,
// its name and renamedKey, beside the objects composed before under the
// old keys. Keeping the keys would make provider-kubernetes create the
// objects under their new names and leave the old ones behind for good,
// an API key's copy among them: an Object looks its remote object up by
// the name in its manifest, and deletes only that (provider-kubernetes
// v1.4.1 internal/controller/object, Observe and Delete). The old Objects
// are carried forward as observed while the model's route names them
// (implied), exactly as a backend removed from the spec; the route names
// the new ones only once they are all on the gateway cluster with their
// key and CA (readBackends, viaLegacy), and from then on Crossplane
// deletes the old ones. No object the serving route names is deleted, and
// the route never names one that is not there.

// renamedKey ends the composition keys of a renamed backend's objects. A
// backend's name, a DNS label, never holds a dot.
const renamedKey = ".v2"

// placement is where one backend's objects are on the gateway cluster,
// and under which composition keys.
type placement struct {
	// object names the Backend, AIServiceBackend, API-key Secret and
	// BackendSecurityPolicy; ca the CA's copy.
	object, ca string
	// key ends the composition keys: the backend's name, with renamedKey
	// if the backend was renamed.
	key string
	// legacy is the object's name before it was renamed, or "".
	legacy string
}

// place is the placement of the ModelRoute route's backend.
func place(route, backend string) placement {
	p := placement{object: names.BackendObject(route, backend), ca: names.BackendCA(route, backend), key: backend}
	if names.BackendRenamed(route, backend) {
		p.key += renamedKey
		p.legacy = names.LegacyBackendObject(route, backend)
	}
	return p
}

// joined reports whether the observed route names the backend by either
// name.
func (p placement) joined(inRoute map[string]bool) bool {
	return inRoute[p.object] || p.legacy != "" && inRoute[p.legacy]
}

// moving reports whether the observed route still names the backend by
// its old name only: its objects are on their way to their new names.
func (p placement) moving(inRoute map[string]bool) bool {
	return p.legacy != "" && inRoute[p.legacy] && !inRoute[p.object]
}

// backendPrefixes start the composition keys of a backend's objects.
var backendPrefixes = []string{prefixBackend, prefixAIBackend, prefixCredential, prefixCredPolicy, prefixCA}

// keyObject is the name of the Backend and AIServiceBackend that the
// composition key n of the ModelRoute route was composed for, and whether
// n is a backend's key at all: a renamed key's objects have the new name,
// any other the name the function gave before (which, for a backend not
// renamed, is the same).
func keyObject(route, n string) (string, bool) {
	for _, p := range backendPrefixes {
		be, ok := strings.CutPrefix(n, p)
		if !ok {
			continue
		}
		if b, renamed := strings.CutSuffix(be, renamedKey); renamed {
			return names.BackendObject(route, b), true
		}
		return names.LegacyBackendObject(route, be), true
	}
	return "", false
}
