package fn

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/gatewayready"
	"github.com/modelplaneai/function-inference-gateway/internal/route"
)

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
			gatewayready.ReasonReady, gatewayready.ReasonClusterAlreadyHasGateway, gatewayready.ReasonWaitingForPreviousGateway, gatewayready.ReasonTLSSecretMissing, gatewayready.ReasonClientCertificateNotReady, gatewayready.ReasonCallerSecretsMissing, gatewayready.ReasonNotProgrammed, gatewayready.ReasonListenersNotProgrammed, gatewayready.ReasonAnchorNotAccepted, gatewayready.ReasonClientPolicyNotAccepted, gatewayready.ReasonTrafficPolicyNotAccepted, gatewayready.ReasonCallerAuthNotAccepted, gatewayready.ReasonDeploymentNotObserved,
			gatewayready.ReasonGenerationNotObserved, gatewayready.ReasonExtProcMarkerMissing, gatewayready.ReasonOldReplicasPresent, gatewayready.ReasonNoReplicaAvailable,
		},
		route.ConditionType: {route.ReasonAccepted, route.ReasonWaitingForGateway, route.ReasonGatewayNotReporting, route.ReasonGatewayLostCluster, route.ReasonGatewayStatusStale, route.ReasonNoUsableBackends, route.ReasonWaitingForCredentials, route.ReasonWaitingForBackends, route.ReasonWaitingForRoute, route.ReasonHTTPRouteNotAccepted, route.ReasonWaitingForAccessPolicy, route.ReasonAccessPolicyNotAccepted, route.ReasonAccessNotEnforceable},
	}
	for typ, rs := range reasons {
		for _, r := range rs {
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

// docFiles are the Markdown files whose relative links TestDocLinks checks:
// the README, everything under docs/, and the test suites' own READMEs.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../README.md", "../test/controlplane/README.md", "../test/sim/README.md"}, docs...)
}

// mdLink matches an inline Markdown link and captures its target.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// mdText is a Markdown file's lines outside fenced code blocks, where a
// '#' starts a shell comment rather than a heading and brackets are code.
func mdText(b []byte) []string {
	var out []string
	fenced := false
	for l := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, l)
		}
	}
	return out
}

// anchors returns the fragments GitHub gives a Markdown file's headings.
func anchors(lines []string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range lines {
		h := strings.TrimLeft(l, "#")
		if h == l || !strings.HasPrefix(h, " ") {
			continue
		}
		a := anchor(h)
		// GitHub numbers repeated headings: x, x-1, x-2.
		if n := seen[a]; n > 0 {
			seen[a]++
			a += "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out
}

// anchor is the fragment GitHub gives a heading: lower case, every
// character but letters, digits, spaces, hyphens and underscores dropped,
// spaces made hyphens.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestAnchor checks anchor against fragments GitHub gives such headings.
func TestAnchor(t *testing.T) {
	cases := map[string]struct {
		heading string
		want    string
	}{
		"Plain":       {heading: " Quick start", want: "quick-start"},
		"Apostrophe":  {heading: " The two markers, and the function's own", want: "the-two-markers-and-the-functions-own"},
		"Code":        {heading: " Using `crossplane beta trace`", want: "using-crossplane-beta-trace"},
		"Punctuation": {heading: " Priority tiers, weights and failover", want: "priority-tiers-weights-and-failover"},
		"Hyphen":      {heading: " A real control plane on loopback: fast-path", want: "a-real-control-plane-on-loopback-fast-path"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, anchor(tc.heading)); diff != "" {
				t.Errorf("anchor(%q): -want, +got:\n%s", tc.heading, diff)
			}
		})
	}
}

// TestDocLinks checks that every relative link in the README and docs/
// resolves: to a file or folder of the repository, and a #fragment to a
// heading of the file it points into, so moving a section cannot leave a
// dead link behind.
func TestDocLinks(t *testing.T) {
	var broken []string
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range mdText(b) {
			for _, m := range mdLink.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, frag, _ := strings.Cut(target, "#")
				file := f
				if path != "" {
					file = filepath.Join(filepath.Dir(f), path)
				}
				if _, err := os.Stat(file); err != nil {
					broken = append(broken, f+": "+target+": no such file")
					continue
				}
				if frag == "" {
					continue
				}
				tb, err := os.ReadFile(file)
				if err != nil {
					broken = append(broken, f+": "+target+": "+err.Error())
					continue
				}
				if !anchors(mdText(tb))[frag] {
					broken = append(broken, f+": "+target+": no such heading")
				}
			}
		}
	}
	if diff := cmp.Diff([]string(nil), broken); diff != "" {
		t.Errorf("broken relative links in the docs: -want, +got:\n%s", diff)
	}
}
