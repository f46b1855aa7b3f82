package controlplane

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
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

// xdsOfLocalities is a dump with one route for model naming one cluster
// whose localities are those given, as protojson writes Envoy Gateway's:
// each named by its Backend in envoy-gateway filter metadata, priority 0
// left out.
func xdsOfLocalities(model string, ls map[string]locality) xdsDump {
	var eps []any
	for _, b := range slices.Sorted(maps.Keys(ls)) {
		l := ls[b]
		e := map[string]any{
			"metadata": map[string]any{"filter_metadata": map[string]any{"envoy-gateway": map[string]any{
				"resources": []any{map[string]any{"kind": "Backend", "name": b, "namespace": "team"}},
			}}},
			"load_balancing_weight": float64(l.weight),
			"lb_endpoints": []any{map[string]any{"endpoint": map[string]any{"address": map[string]any{
				"socket_address": map[string]any{"address": b + ".example", "port_value": float64(l.port)},
			}}}},
		}
		if l.priority != 0 {
			e["priority"] = float64(l.priority)
		}
		eps = append(eps, e)
	}
	return xdsDump{
		"routes": {{"name": "r", "virtual_hosts": []any{map[string]any{"routes": []any{map[string]any{
			"match": map[string]any{"headers": []any{map[string]any{"name": "x-ai-eg-model", "string_match": map[string]any{"exact": model}}}},
			"route": map[string]any{"cluster": "c"},
		}}}}}},
		"clusters": {{"name": "c", "load_assignment": map[string]any{"endpoints": eps}}},
	}
}

// TestCheckLocalities checks the soak's xDS check of a route's backends:
// it passes on what the route asks for, and names the difference
// otherwise.
func TestCheckLocalities(t *testing.T) {
	want := map[string]locality{
		"m-local":  {priority: 1, weight: 3, port: 8001},
		"m-extra":  {priority: 1, weight: 1, port: 8000},
		"m-hosted": {priority: 0, weight: 1},
	}
	served := map[string]locality{
		"m-local":  {priority: 1, weight: 3, port: 8001},
		"m-extra":  {priority: 1, weight: 1, port: 8000},
		"m-hosted": {priority: 0, weight: 1, port: 443},
	}
	with := func(name string, l locality) map[string]locality {
		m := maps.Clone(served)
		m[name] = l
		return m
	}
	without := func(name string) map[string]locality {
		m := maps.Clone(served)
		delete(m, name)
		return m
	}
	for _, tc := range []struct {
		name   string
		served map[string]locality
		want   string // in the message; "" passes
	}{
		{name: "as asked", served: served},
		{name: "the old port", served: with("m-local", locality{priority: 1, weight: 3, port: 8000}), want: "m-local"},
		{name: "the old weight", served: with("m-local", locality{priority: 1, weight: 1, port: 8001}), want: "m-local"},
		{name: "the old tier", served: with("m-extra", locality{priority: 0, weight: 1, port: 8000}), want: "m-extra"},
		{name: "a removed backend still served", served: with("m-gone", locality{weight: 1, port: 8000}), want: "none of the backends"},
		{name: "an added backend not served yet", served: without("m-extra"), want: "m-extra"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkLocalities("m", want)(xdsOfLocalities("m", tc.served))
			if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
				t.Errorf("checkLocalities: %q, want a message with %q", got, tc.want)
			}
		})
	}
	if got := checkLocalities("other", want)(xdsOfLocalities("m", served)); !strings.Contains(got, "no route") {
		t.Errorf("checkLocalities of a model without a route: %q", got)
	}
}

// TestSoakRouteModel checks that a soak route's ModelRoute and what the
// soak expects of it agree, in every shape a change can give it: a
// locality for each backend of the spec, in the spec's tier, of the spec's
// weight divided by the greatest common divisor of its tier's weights, as
// the function normalises them (internal/route/tiers.go).
func TestSoakRouteModel(t *testing.T) {
	for _, r := range []soakRoute{
		{name: "soak-000", secret: "soak-key-0", port: 8000, weight: 1},
		{name: "soak-001", port: 8001, weight: 4, extra: true},
		{name: "soak-002", secret: "soak-key-1", port: 8000, weight: 2, extra: true, swapped: true},
		{name: "soak-003", port: 8000, weight: 1, swapped: true},
		// Alone in its tier, a weight of 3 is 1 to Envoy: the tier's
		// weights are divided by their GCD.
		{name: "soak-004", port: 8001, weight: 3},
	} {
		t.Run(r.name, func(t *testing.T) {
			spec := r.object().Object["spec"].(map[string]any)
			got := map[string]locality{}
			for _, b := range spec["backends"].([]any) {
				m := b.(map[string]any)
				w, ok := m["weight"].(int64)
				if !ok {
					w = int64(v1alpha1.DefaultWeight)
				}
				var port int64
				if m["apiKey"] == nil {
					port, _ = m["endpoint"].(map[string]any)["port"].(int64)
				}
				got[names.BackendObject(r.name, m["name"].(string))] = locality{priority: m["priority"].(int64), weight: w, port: port}
			}
			divisor := map[int64]int64{}
			for _, l := range got {
				divisor[l.priority] = gcd64(divisor[l.priority], l.weight)
			}
			for n, l := range got {
				l.weight /= divisor[l.priority]
				got[n] = l
			}
			if diff := cmp.Diff(r.localities(), got, cmp.AllowUnexported(locality{})); diff != "" {
				t.Errorf("localities() against the ModelRoute's backends -want +got:\n%s", diff)
			}
			tiers := map[int64]bool{}
			for _, p := range r.priorities() {
				tiers[p] = true
			}
			if len(tiers) != 2 {
				t.Errorf("the route's tiers are %v, want two", r.priorities())
			}
		})
	}
}

func gcd64(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
