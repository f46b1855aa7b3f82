package names

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// remoteName is one object a route composes in its team namespace: a kind
// of object (names only collide within a kind) and its name.
type remoteName struct{ kind, name string }

// named is a remoteName and the role it has for its route: "object", "ca"
// or "sources" (one per route, shared by its backends).
type named struct {
	remoteName
	role string
}

// backendNames are every name the route's backend gives objects in the
// team namespace, with the kinds that carry each, and the route's own
// sources ConfigMap.
func backendNames(route, backend string) []named {
	return namesOf(BackendObject, BackendCA, route, backend)
}

// namesOf is backendNames with the two naming functions given.
func namesOf(object, caCopy func(string, string) string, route, backend string) []named {
	o, ca := object(route, backend), caCopy(route, backend)
	return []named{
		{remoteName{"Backend", o}, "object"}, {remoteName{"AIServiceBackend", o}, "object"},
		{remoteName{"BackendSecurityPolicy", o}, "object"}, {remoteName{"Secret", o}, "object"},
		{remoteName{"Secret", ca}, "ca"}, {remoteName{"ConfigMap", ca}, "ca"},
		{remoteName{"ConfigMap", Child(route, "sources")}, "sources"},
	}
}

// routeNames are the route names of the exhaustive check: every DNS
// subdomain of up to five characters over a, 1, "-" and ".", and some
// long ones around the limits.
func routeNames() []string {
	var out []string
	var walk func(string)
	walk = func(s string) {
		if s != "" && len(validation.IsDNS1123Subdomain(s)) == 0 {
			out = append(out, s)
		}
		if len(s) == 5 {
			return
		}
		for _, c := range []string{"a", "1", "-", "."} {
			walk(s + c)
		}
	}
	walk("")
	for _, n := range []int{40, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 100, 253} {
		out = append(out, strings.Repeat("r", n), strings.Repeat("r", n-2)+"-a")
	}
	return out
}

// backendLabels are the backend names of the exhaustive check: every DNS
// label of up to four characters over a, c and "-" (ca among them), and
// long ones.
func backendLabels() []string {
	var out []string
	var walk func(string)
	walk = func(s string) {
		if s != "" && len(validation.IsDNS1123Label(s)) == 0 {
			out = append(out, s)
		}
		if len(s) == 4 {
			return
		}
		for _, c := range []string{"a", "c", "-"} {
			walk(s + c)
		}
	}
	walk("")
	return append(out, strings.Repeat("b", 63), "b-"+strings.Repeat("b", 61), "sources", "ca-ca")
}

// TestBackendNamesInjective checks, for every pair of (route, backend) of
// the exhaustive sets, that no two distinct pairs, nor two roles of one
// pair, give one object of one kind the same name; that every name is a
// DNS subdomain of at most 63 characters; and that a name that did not
// change is the one the function composed before. The same check finds
// the names the function gave before colliding.
func TestBackendNamesInjective(t *testing.T) {
	routes, backends := routeNames(), backendLabels()
	if err := checkInjective(BackendObject, BackendCA, routes, backends); err != nil {
		t.Fatal(err)
	}
	if err := checkInjective(LegacyBackendObject, LegacyBackendCA, routes, backends); err == nil {
		t.Fatal("the check finds no collision among the names the function gave before, which had them (route a with backend b-c, route a-b with backend c)")
	} else {
		t.Logf("the names before collide: %v", err)
	}
	for _, r := range routes {
		for _, b := range backends {
			if BackendRenamed(r, b) == (BackendCA(r, b) == LegacyBackendCA(r, b)) {
				t.Fatalf("route %q backend %q: the object and its CA copy are not renamed together (%q, %q)", r, b, BackendObject(r, b), BackendCA(r, b))
			}
		}
	}
}

// checkInjective is TestBackendNamesInjective's check of a naming.
func checkInjective(object, caCopy func(string, string) string, routes, backends []string) error {
	seen := map[remoteName]string{}
	for _, r := range routes {
		for _, b := range backends {
			for _, n := range namesOf(object, caCopy, r, b) {
				if errs := validation.IsDNS1123Subdomain(n.name); len(errs) > 0 || len(n.name) > maxName {
					return fmt.Errorf("route %q backend %q: %s name %q is not a name of at most 63 characters: %v", r, b, n.kind, n.name, errs)
				}
				who := fmt.Sprintf("route %q backend %q as its %s", r, b, n.role)
				if n.role == "sources" {
					who = fmt.Sprintf("route %q as its sources", r)
				}
				if prev, ok := seen[n.remoteName]; ok && prev != who {
					return fmt.Errorf("%s %q is composed by %s and by %s", n.kind, n.name, prev, who)
				}
				seen[n.remoteName] = who
			}
		}
	}
	return nil
}

func TestBackendNames(t *testing.T) {
	cases := map[string]struct {
		route, backend string
		object, ca     string
		renamed        bool
	}{
		"Plain":        {route: "qwen3-8b", backend: "vllm", object: "qwen3-8b-vllm", ca: "qwen3-8b-vllm-ca"},
		"Dotted":       {route: "qwen3-8b", backend: "vllm-a", object: "qwen3-8b-vllm.a", ca: "qwen3-8b-vllm.a-ca", renamed: true},
		"TheCollision": {route: "a", backend: "b-c", object: "a-b.c", ca: "a-b.c-ca", renamed: true},
		"ItsPartner":   {route: "a-b", backend: "c", object: "a-b-c", ca: "a-b-c-ca"},
		"NamedCA":      {route: "qwen", backend: "ca", object: "qwen-ca--", ca: "qwen-ca--", renamed: true},
		"DoubleDash":   {route: "qwen", backend: "a--b", object: "qwen-a--b--", ca: "qwen-a--b--", renamed: true},
		"PlainMax":     {route: strings.Repeat("r", 55), backend: "vllm", object: strings.Repeat("r", 55) + "-vllm", ca: strings.Repeat("r", 55) + "-vllm-ca"},
		"PastPlain":    {route: strings.Repeat("r", 56), backend: "vllm", object: strings.Repeat("r", 45) + "--", ca: strings.Repeat("r", 45) + "--", renamed: true},
		"DottedRoute":  {route: "qwen.v2", backend: "vllm", object: "qwen.v2-vllm", ca: "qwen.v2-vllm-ca"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o, ca := BackendObject(tc.route, tc.backend), BackendCA(tc.route, tc.backend)
			if !strings.HasPrefix(o, tc.object) || (tc.renamed == false && o != tc.object) {
				t.Errorf("BackendObject(%q, %q) = %q, want %q", tc.route, tc.backend, o, tc.object)
			}
			if !strings.HasPrefix(ca, tc.ca) || (tc.renamed == false && ca != tc.ca) {
				t.Errorf("BackendCA(%q, %q) = %q, want %q", tc.route, tc.backend, ca, tc.ca)
			}
			if got := BackendRenamed(tc.route, tc.backend); got != tc.renamed {
				t.Errorf("BackendRenamed(%q, %q) = %t, want %t", tc.route, tc.backend, got, tc.renamed)
			}
		})
	}
}

// FuzzBackendNames: two different pairs never share a name of one kind,
// whatever the names, beyond the exhaustive sets.
func FuzzBackendNames(f *testing.F) {
	f.Add("a", "b-c", "a-b", "c")
	f.Add("x", "y-ca", "x", "y")
	f.Add("q", "ca", "q-ca", "x")
	f.Fuzz(func(t *testing.T, r1, b1, r2, b2 string) {
		valid := func(r, b string) bool {
			return len(validation.IsDNS1123Subdomain(r)) == 0 && len(validation.IsDNS1123Label(b)) == 0
		}
		if !valid(r1, b1) || !valid(r2, b2) || (r1 == r2 && b1 == b2) {
			return
		}
		for _, n1 := range backendNames(r1, b1) {
			for _, n2 := range backendNames(r2, b2) {
				if n1.remoteName != n2.remoteName {
					continue
				}
				// The sources ConfigMap is the route's own: shared by its
				// backends, distinct between routes.
				if n1.role == "sources" && n2.role == "sources" && r1 == r2 {
					continue
				}
				t.Fatalf("route %q backend %q and route %q backend %q both name a %s %q", r1, b1, r2, b2, n1.kind, n1.name)
			}
		}
	})
}
