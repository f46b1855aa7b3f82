package harness

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSelectedControllers(t *testing.T) {
	type want struct {
		crossplane, provider string
		err                  bool
	}
	cases := map[string]struct {
		reason string
		env    string
		want   want
	}{
		"Unset": {
			reason: "Unset picks the newest served pair, the one CI builds and runs.",
			want:   want{crossplane: "v2.3.0", provider: "v1.4.1"},
		},
		"Newest": {
			reason: "The default pair's own name picks it too.",
			env:    "newest",
			want:   want{crossplane: "v2.3.0", provider: "v1.4.1"},
		},
		"Older": {
			reason: "older picks the pair before, each from its own tools module.",
			env:    "older",
			want:   want{crossplane: "v2.2.0", provider: "v1.3.1"},
		},
		"Unknown": {
			reason: "A value that names no pair is refused, never run as the default.",
			env:    "v2.2",
			want:   want{err: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv(controllersEnv, tc.env)
			p, err := selectedControllers()
			got := want{crossplane: p.crossplane.Version, provider: p.provider.Version, err: err != nil}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nselectedControllers(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestControllerToolsModules(t *testing.T) {
	// Each pair's tools come from modules of their own, so that both are
	// built and cached side by side; ToolsFor holds exactly one of each
	// kind.
	for _, p := range []Controllers{newestControllers, olderControllers} {
		var got []string
		for _, tl := range ToolsFor(p) {
			if tl.Name == "crossplane" || tl.Name == "provider-kubernetes" {
				got = append(got, tl.Name+"-"+tl.Version+" from tools/"+tl.module)
			}
		}
		want := map[string][]string{
			"newest": {"provider-kubernetes-v1.4.1 from tools/provider-kubernetes", "crossplane-v2.3.0 from tools/crossplane"},
			"older":  {"provider-kubernetes-v1.3.1 from tools/provider-kubernetes-v1.3", "crossplane-v2.2.0 from tools/crossplane-v2.2"},
		}[p.name]
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("toolsFor(%s): -want, +got:\n%s", p.name, diff)
		}
	}
}
